"""Issue 17 items 6, 7 and 9: the querycompute logger and warning classes, environment
variables validated without breaking import, discoverability (docstrings, type hints, repr,
py.typed, __all__), packaging. Subprocesses where a fresh process is the point (import, an
environment read once); one cpu compile in all."""
import builtins
import inspect
import json
import logging
import os
import subprocess
import sys
import textwrap
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

import querycompute as qc
from querycompute import config
from querycompute.cache import settings

from cache_worker import child_env

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, code: str, **env) -> subprocess.CompletedProcess:
    script = tmp_path / "user_script.py"          # lambdas live in files (the frontend reads them)
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=child_env(tmp_path / "cache", **env), timeout=300)


# ----- item 6: logger, warnings, environment variables -------------------------------------

def test_item6_compile_is_logged_with_duration_and_origin(caplog):
    x = np.arange(1000, dtype=np.int16)
    with caplog.at_level(logging.DEBUG, logger="querycompute"):
        got = qc.query(x).on("cpu").select(lambda v: v * 3 + 17).where(lambda v: v % 5 == 1).count()
    assert got == int(((x * 3 + 17) % 5 == 1).sum())
    texts = [r.getMessage() for r in caplog.records if r.name == "querycompute"]
    assert any(t.startswith("compile start: cpu kernel for select(lambda v: v * 3 + 17)") for t in texts)
    ends = [t for t in texts if t.startswith("compile end: cpu kernel")]
    assert ends and " ms (origin: " in ends[0]
    assert ends[0].endswith(("(origin: compiled)", "(origin: disk)"))


def test_item6_dump_source_goes_through_the_logger(monkeypatch, caplog):
    monkeypatch.setenv("QUERYCOMPUTE_DUMP_SOURCE", "1")
    with caplog.at_level(logging.INFO, logger="querycompute.source"):
        settings.dump_source("qc_sum", "opencl", "__kernel void qc_sum() {}")
    record, = [r for r in caplog.records if r.name == "querycompute.source"]
    assert "opencl kernel qc_sum" in record.getMessage()
    assert record.getMessage().endswith("__kernel void qc_sum() {}")


def test_item6_warnings_point_at_the_callers_line():
    from querycompute.backends import registry
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        registry.mark_broken("no-such-backend", "a test")      # warns from inside the package
    registry._broken.pop("no-such-backend", None)
    assert caught[0].category is qc.FallbackWarning
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
    assert issubclass(qc.FallbackWarning, UserWarning) and issubclass(qc.ConfigWarning, UserWarning)


def test_item6_bad_values_never_break_import_and_are_warned_at_the_users_line(tmp_path):
    done = _run(tmp_path, """
        import json, warnings
        import numpy as np
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import querycompute as qc                   # line 6: the memo size is read here
            from querycompute.backends import registry
            x = np.arange(10, dtype=np.float64)
            total = qc.query(x).on("numpy").select(lambda v: v + 1).sum()   # line 9
        print(json.dumps({"total": float(total), "threshold": registry.gpu_threshold(),
                          "disk": qc.cache.stats().disk_enabled,
                          "warnings": [[w.category.__name__, w.filename.endswith("user_script.py"),
                                        w.lineno, str(w.message)] for w in caught]}))
        """, QUERYCOMPUTE_GPU_MIN_ELEMENTS="abc", QUERYCOMPUTE_CACHE="banana",
        QUERYCOMPUTE_MEMO_SIZE="-3")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["total"] == float((np.arange(10.0) + 1).sum())
    assert out["threshold"] == config.VARIABLES["QUERYCOMPUTE_GPU_MIN_ELEMENTS"].default
    assert out["disk"] is True                                   # the default, not "banana"
    by_var = {msg.split("=")[0].split()[-1]: (cat, mine, line) for cat, mine, line, msg in out["warnings"]}
    for var, line in (("QUERYCOMPUTE_GPU_MIN_ELEMENTS", 9), ("QUERYCOMPUTE_CACHE", 9),
                      ("QUERYCOMPUTE_MEMO_SIZE", 6)):
        assert by_var[var] == ("ConfigWarning", True, line), (var, out["warnings"])
    assert any("'banana' is not accepted (1/0, true/false, yes/no, on/off)" in w[3] for w in out["warnings"])


@pytest.mark.parametrize("text, value", [("1000000", 1_000_000), ("1e6", 1_000_000),
                                         ("1_000_000", 1_000_000), (" 262144 ", 262144)])
def test_item6_counts_accept_what_people_write(monkeypatch, text, value):
    monkeypatch.setenv("QUERYCOMPUTE_GPU_MIN_ELEMENTS", text)
    assert config.get("QUERYCOMPUTE_GPU_MIN_ELEMENTS") == value


@pytest.mark.parametrize("text", ["abc", "1.5", "-1", "1e400"])
def test_item6_bad_counts_are_refused(text):
    with pytest.raises(ValueError):
        config.parse_count(text)


def test_item6_numba_disable_jit_leaves_auto_on_numpy(tmp_path):
    done = _run(tmp_path, """
        import json
        import numpy as np
        import querycompute as qc
        x = np.arange(100, dtype=np.float32)
        got = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 50).sum()
        print(json.dumps({"cpu": qc.backends()["cpu"], "got": float(got),
                          "backend": qc.last_trace().backend}))
        """, NUMBA_DISABLE_JIT="1", QUERYCOMPUTE_TIERED="0")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    x = np.arange(100, dtype=np.float32) * 2
    assert out["got"] == float(x[x > 50].sum()) and out["backend"] == "numpy"
    assert out["cpu"]["available"] is False and "NUMBA_DISABLE_JIT" in out["cpu"]["reason"]


def test_item6_configuration_page_lists_every_variable():
    page = (ROOT / "docs" / "configuration.md").read_text()
    for name, var in config.VARIABLES.items():
        assert f"`{name}`" in page, name
    read_here = set()
    for path in (ROOT / "querycompute").rglob("*.py"):
        for word in path.read_text().replace('"', " ").replace("'", " ").split():
            if word.startswith("QUERYCOMPUTE_") and word.rstrip(",.:;)").isupper():
                read_here.add(word.rstrip(",.:;)=0123456789").rstrip("_="))
    assert read_here <= set(config.VARIABLES) | {"QUERYCOMPUTE_"}, read_here - set(config.VARIABLES)


def test_item9_pocl_build_chatter_stays_off_stderr(tmp_path):
    pytest.importorskip("pyopencl")
    if not qc.backends()["opencl"]["available"]:
        pytest.skip("no OpenCL device")
    done = _run(tmp_path, """
        import os, random
        from querycompute.backends.opencl.opencl_device import build_program, open_device
        from querycompute.errors import CompileError
        ctx = open_device().context       # a device that compiles (opencl_device.probe)
        # a fresh source each run (pocl caches builds): a warning the compiler must report
        src = "/* %d */ __kernel void k(__global float* x) { double d = 1e400; x[0] = d; }" % os.getpid()
        build_program(ctx, ctx.devices[0], src, [])
        try:
            build_program(ctx, ctx.devices[0], "__kernel void k(__global float* x) { x[0] = y; }", [])
        except CompileError as exc:
            print("error kept:", "undeclared identifier 'y'" in str(exc))
        """)
    assert done.returncode == 0, done.stderr
    assert "error kept: True" in done.stdout
    assert "generated" not in done.stderr and "warning" not in done.stderr.lower(), done.stderr


# ----- item 7: discoverability ------------------------------------------------------------

OPERATORS = ("select", "where", "order_by", "order_by_descending", "then_by", "then_by_descending",
             "take", "skip", "take_while", "skip_while", "reverse", "distinct", "scan", "join",
             "left_join", "intersect_by", "except_by", "group_by", "on")
TERMINALS = ("to_array", "to_list", "sum", "min", "max", "mean", "count", "any", "all", "first",
             "last", "element_at", "single", "aggregate", "agg", "to_pandas", "to_polars", "to_arrow")


@pytest.mark.parametrize("name", OPERATORS + TERMINALS)
def test_item7_every_operator_and_terminal_is_documented_and_typed(name):
    method = getattr(qc.Query, name)
    doc = inspect.getdoc(method) or ""
    assert "Example:" in doc and ("Returns:" in doc or name == "to_list"), name
    assert inspect.signature(method).return_annotation is not inspect.Signature.empty, name
    if name in TERMINALS and name not in ("to_array", "to_list", "agg"):
        # the empty-input rule: a value, or the error it raises
        assert "empty" in doc.lower(), name


def test_item7_classes_and_entry_points_are_documented():
    for obj in (qc.Query, qc.Grouped, qc.CompiledQuery, qc.query, qc.range):
        assert "Example:" in (inspect.getdoc(obj) or ""), obj
    for name in ("agg", "count", "sum", "min", "max", "mean", "explain", "source"):
        assert inspect.getdoc(getattr(qc.Grouped, name)), name
    for name in ("backend", "tier", "wait", "trace", "source", "explain", "__call__"):
        assert inspect.getdoc(getattr(qc.CompiledQuery, name)), name


def test_item7_repr_shows_source_dtypes_n_and_lambdas():
    x = np.arange(7, dtype=np.int32)
    q = qc.query(price=x, qty=x.astype(np.float64)).where(lambda r: r.qty > 2).take(3)
    text = repr(q)
    for part in ("table", "price: int32", "qty: float64", "n=7", "where(lambda r: r.qty > 2)",
                 "take(3)", "on auto"):
        assert part in text, (part, text)
    page = q._repr_html_()
    assert "<table>" in page and "int32" in page and "lambda r: r.qty &gt; 2" in page


def test_item7_star_import_does_not_shadow_builtins():
    namespace: dict = {}
    exec("from querycompute import *", namespace)
    shadowed = set(namespace) & set(dir(builtins)) - {"__builtins__"}
    assert not shadowed, shadowed
    assert "query" in namespace and "FallbackWarning" in namespace
    assert qc.sum is not builtins.sum and qc.range(3).to_list() == [0, 1, 2]    # still qc.*


def test_item7_package_is_typed():
    assert (ROOT / "querycompute" / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["querycompute"]


# ----- item 9: packaging ------------------------------------------------------------------

def test_item9_extras_license_and_one_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    assert any(r.startswith("nvidia-cuda-nvrtc-cu12") for r in extras["cuda12"])
    assert any(r.startswith("nvidia-cuda-nvrtc") and "13" in r for r in extras["cuda13"])
    assert not any("test" in r for r in extras["all"])
    cuda_wheels = [r for r in extras["test"] if r.startswith(("cupy", "nvidia-"))]
    assert cuda_wheels and all('platform_system == "Linux"' in r for r in cuda_wheels)
    # the version: written once, in querycompute/__init__.py
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "querycompute.__version__"}
    from importlib.metadata import version
    assert version("querycompute") == qc.__version__
    license_text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in license_text and "querycompute developers" in license_text
    tracked = subprocess.run(["git", "ls-files", "querycompute.egg-info"], cwd=ROOT,
                             capture_output=True, text=True).stdout
    assert tracked == ""
    assert os.path.exists(ROOT / ".gitignore")
