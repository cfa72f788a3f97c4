"""Smoke run of benchmarks/cache_latency.py at tiny n: it runs end to end, its results pass
the workloads' numpy check, and each process's kernels came from where they should (the
script itself refuses a cold process that did not compile or a warm one that did). No
timing is asserted."""
import json
import subprocess
import sys
from pathlib import Path

from test_cache_backends import opencl_available

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "cache_latency.py"


def test_cache_latency_reports_cold_and_warm_first_calls(tmp_path):
    backends = "cpu,opencl" if opencl_available() else "cpu"
    out = subprocess.run([sys.executable, str(SCRIPT), "--n", "500", "--rounds", "1",
                          "--workloads", "W1", "--backends", backends,
                          "--json", str(tmp_path / "rows.json")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = json.loads((tmp_path / "rows.json").read_text())
    seen = {(r["backend"], r["process"]) for r in rows}
    assert {("cpu", "cold"), ("cpu", "disk-warm")} <= seen
    if "opencl" in backends:
        assert {("opencl", "cold"), ("opencl", "disk-warm"),
                ("opencl", "disk-warm, pocl cold")} <= seen
    assert all(r["first_ms"] > 0 and r["import_ms"] > 0 for r in rows)
    assert "target < 35%" in out.stdout


def test_cache_latency_refuses_a_backend_without_a_target():
    out = subprocess.run([sys.executable, str(SCRIPT), "--backends", "metal"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "no cache-latency target" in out.stderr
