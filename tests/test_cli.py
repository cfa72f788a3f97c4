"""The `querycompute` command: source, explain, backends, demo (real subprocesses)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from querycompute.cli.main import main


def run_cli(*args, timeout=600):
    env = {**os.environ}
    return subprocess.run([sys.executable, "-m", "querycompute", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_backends_json():
    r = run_cli("backends", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["cpu"]["available"] is True and "reason" in info["metal"]


@pytest.mark.parametrize("backend,marker", [("cuda", "__global__"), ("opencl", "__kernel"),
                                            ("metal", "kernel void"), ("cpu", "define void")])
def test_source_for_each_dialect(capsys, backend, marker):
    assert main(["source", "select(lambda v: v*2).where(lambda v: v > 1000).sum()",
                 "--dtype", "float32", "--backend", backend]) == 0
    assert marker in capsys.readouterr().out


def test_source_zip_and_table(capsys):
    assert main(["source", "select(lambda a, b: a * b + 1).sum()", "--input", "a:float32",
                 "--input", "b:int32", "--backend", "opencl"]) == 0
    assert "__kernel" in capsys.readouterr().out
    assert main(["explain", "where(lambda r: r.cat == 3 and r.qty > 2).sum(lambda r: r.price * r.qty)",
                 "--field", "price:float32", "--field", "qty:int32", "--field", "cat:int32"]) == 0
    out = capsys.readouterr().out
    assert "source: table(price:float32, qty:int32, cat:int32)" in out and "fused plan" in out


def test_explain_agg(capsys):
    assert main(["explain", "agg(total=qc.sum, peak=qc.max(lambda v: v*v))", "--dtype", "int32",
                 "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "aggregate sum" in out and "aggregate max" in out


def test_chain_is_never_executed_and_errors_are_clear(capsys):
    # a query error exits 1 (a usage error 2: tests/test_issue17_cli.py)
    assert main(["source", "select(lambda v: open('x')).sum()", "--backend", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "querycompute: error:" in err and "<query>" in err
    assert main(["source", "select(lambda v: v).bogus()"]) == 1
    assert "unknown operator" in capsys.readouterr().err


def test_demo_runs():
    r = run_cli("demo", "--n", "20000")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "W1" in r.stdout and "ok" in r.stdout and "Generated source" in r.stdout
