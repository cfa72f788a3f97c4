"""Issue 17 item 11: the benchmark presentation (benchmarks/report.py and plot.py) on a small
peers.json: speed-up over NumPy (numpy ms / implementation ms) in the figure, the Markdown and
the CSV; workload names in the panel titles; WRONG / n/a / error peers marked, not dropped;
machine, versions and date carried. (tests/test_benchmarks_smoke.py runs peers.py itself.)"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import plot  # noqa: E402
import report  # noqa: E402

META = {"date": "2026-11-24 07:00:00", "machine": "Test CPU 9000", "cpus": 2, "python": "3.11.7",
        "numpy": "2.4.6", "numba": "0.68.1", "querycompute": "0.1.0", "backends": ["cpu"], "repeat": 3,
        "load_average_end": 0.5, "peer_versions": {"numexpr": "2.14.2", "polars": "2.1.0"},
        "workloads": {"W1": "select(v*2).where(v>1000).select(v+100).sum()", "W3": "count(500<v<1500)"}}


def _rec(workload, n, impl, status="ok", ms=None, reason=None):
    r = {"workload": workload, "n": n, "impl": impl, "status": status, "input_bytes": 4 * n}
    if ms is not None:
        r.update(median_ms=ms, min_ms=ms, gbps=4 * n / (ms * 1e-3) / 1e9, first_ms=ms)
    if reason:
        r["reason"] = reason
    return r


RESULTS = [
    _rec("W1", 1000, "numpy", ms=0.02), _rec("W1", 1000, "qc-cpu", ms=0.005),
    _rec("W1", 1000, "numexpr", "wrong", reason="relative error 7e-3 (float32 sum)"),
    _rec("W1", 1000, "polars", ms=0.08),
    _rec("W1", 100000, "numpy", ms=0.5), _rec("W1", 100000, "qc-cpu", ms=0.05),
    _rec("W1", 100000, "numexpr", "wrong", reason="relative error 7e-3 (float32 sum)"),
    _rec("W1", 100000, "polars", ms=0.4),
    _rec("W3", 1000, "numpy", ms=0.01), _rec("W3", 1000, "qc-cpu", ms=0.004),
    _rec("W3", 1000, "numexpr", ms=0.03), _rec("W3", 1000, "numba-fastmath", "n/a"),
    _rec("W3", 1000, "polars", "error", reason="ComputeError: boom"),
]


@pytest.fixture
def results_file(tmp_path):
    p = tmp_path / "peers.json"
    p.write_text(json.dumps({"meta": META, "results": RESULTS}))
    return p


def _expected_speedups():
    base = {(r["workload"], r["n"]): r["median_ms"] for r in RESULTS if r["impl"] == "numpy"}
    return {(r["workload"], r["n"], r["impl"]): base[r["workload"], r["n"]] / r["median_ms"]
            for r in RESULTS if r["status"] == "ok"}


def test_item11_csv_has_every_row_with_the_speedup_over_numpy(results_file):
    md, cs = report.write_tables(results_file)
    rows = list(csv.DictReader(io.StringIO(cs.read_text())))
    assert len(rows) == len(RESULTS)                      # untimed peers are rows too
    want = _expected_speedups()
    for row in rows:
        key = (row["workload"], int(row["n"]), row["impl"])
        assert row["title"] == META["workloads"][row["workload"]]
        if row["status"] == "ok":
            assert float(row["speedup_vs_numpy"]) == pytest.approx(want[key])
        else:
            assert row["speedup_vs_numpy"] == "" and row["median_ms"] == ""
    assert {r["status"] for r in rows} == {"ok", "wrong", "n/a", "error"}


def test_item11_markdown_names_workloads_marks_untimed_and_carries_the_machine(results_file):
    md, _ = report.write_tables(results_file)
    text = md.read_text()
    for key, title in META["workloads"].items():
        assert f"### {key}: `{title}`" in text
    assert "faster than NumPy" in text and "numpy ms / implementation ms" in text
    w1 = text.split("### W3")[0]
    assert "| numexpr | WRONG | WRONG |" in w1 and "relative error 7e-3" in w1
    qc_row = next(ln for ln in w1.splitlines() if ln.startswith("| qc-cpu |"))
    assert f"{_expected_speedups()['W1', 1000, 'qc-cpu']:.2f}x" in qc_row
    w3 = text.split("### W3")[1]
    assert "| numba-fastmath | n/a |" in w3 and "| polars | error |" in w3 and "ComputeError" in w3
    for fact in ("Test CPU 9000", "2026-11-24", "numpy 2.4.6", "numexpr 2.14.2", "short run"):
        assert fact in text


def test_item11_figure_plots_speedups_titles_untimed_marks_and_footer(results_file, tmp_path):
    fig = plot.build_figure(report.load(results_file))
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == [f"{k}: {t}" for k, t in META["workloads"].items()]
    want = _expected_speedups()
    for ax, key in zip(axes, ("W1", "W3")):
        assert "speed-up" in ax.get_ylabel()
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        qc_line = lines["qc-cpu"]
        assert list(qc_line.get_ydata()) == pytest.approx(
            [want[key, n, "qc-cpu"] for n in sorted(qc_line.get_xdata())])
        assert any(label.startswith("numpy") for label in lines)        # the line at 1
        notes = " ".join(t.get_text() for t in ax.texts)
        untimed = {r["impl"]: r["status"] for r in RESULTS if r["workload"] == key and r["status"] != "ok"}
        for impl, status in untimed.items():
            assert f"{impl}: {report.STATUS_LABEL[status]}" in notes
    footer = " ".join(t.get_text() for t in fig.texts)
    for fact in ("Test CPU 9000", "2026-11-24", "numpy 2.4.6", "querycompute 0.1.0", "3 warm samples"):
        assert fact in footer.replace("\n", " ")
    png = plot.plot_file(results_file, tmp_path / "peers.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
