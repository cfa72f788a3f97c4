"""A peers.json as tables: Markdown (for docs/performance.md) and CSV (for anything else).

    python benchmarks/report.py results/peers.json          # writes peers.md and peers.csv beside it

The one figure every view shows is the **speed-up over NumPy**: numpy's median ms divided by
the implementation's median ms, for the same workload and n, timed in the same process. Above
1 the implementation is faster than NumPy, below 1 slower. It is computed here from the
medians (one home for it: plot.py uses `speedups` too), so older peers.json files work.

Implementations that were not timed are listed, never dropped: `wrong` (the result disagreed
with NumPy's; the reason says how), `n/a` (the peer has no version of that workload),
`error` (it raised) and `fallback` (querycompute ran elsewhere than the backend asked for).
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

STATUS_LABEL = {"ok": "ok", "wrong": "WRONG", "n/a": "n/a", "error": "error", "fallback": "fell back",
                "checked": "correct, untimed"}
CSV_COLUMNS = ["workload", "title", "n", "impl", "status", "median_ms", "numpy_ms", "speedup_vs_numpy",
               "gbps", "first_ms", "compile_ms", "reason"]


def load(json_path) -> dict:
    return json.loads(Path(json_path).read_text())


def speedups(records) -> dict:
    """{(workload, n, impl): numpy median ms / impl median ms} for every timed record."""
    base = {(r["workload"], r["n"]): r["median_ms"] for r in records
            if r["impl"] == "numpy" and r["status"] == "ok"}
    return {(r["workload"], r["n"], r["impl"]): base[(r["workload"], r["n"])] / r["median_ms"]
            for r in records if r["status"] == "ok" and (r["workload"], r["n"]) in base}


def titles(report) -> dict:
    """{workload key: its query as text}; older files without meta["workloads"] get it from
    workloads.py."""
    known = report.get("meta", {}).get("workloads")
    if known:
        return dict(known)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import workloads
    return {k: w.title for k, w in workloads.WORKLOADS.items()}


def machine_line(meta) -> str:
    """Where and when: machine, CPUs, versions, date, samples (a short run says so)."""
    versions = ", ".join(f"{k} {meta[k]}" for k in ("querycompute", "python", "numpy", "numba") if k in meta)
    peers = ", ".join(f"{k} {v}" for k, v in sorted(meta.get("peer_versions", {}).items()) if k not in meta)
    repeat = meta.get("repeat")
    short = " (a short run: figures are indicative)" if repeat is not None and repeat < 7 else ""
    backends = f"querycompute backends: {', '.join(meta['backends'])}" if meta.get("backends") else ""
    threads = f", numba threads: {meta['threads']}" if "threads" in meta else ""
    parts = [f"{meta.get('machine', '?')}, {meta.get('cpus', '?')} cpus{threads}", versions, peers, backends,
             f"{meta.get('date', '?')}", f"median of {repeat} warm samples{short}",
             f"load {meta['load_average_end']:.1f}" if "load_average_end" in meta else ""]
    return "; ".join(p for p in parts if p)


def _fmt_n(n) -> str:
    return f"{n:.0e}".replace("e+0", "e")


def speedup_text(s: float) -> str:
    return f"{s:.2f}x faster than numpy" if s >= 1 else f"{1 / s:.2f}x slower than numpy"


def to_markdown(report) -> str:
    records, meta = report["results"], report.get("meta", {})
    s, names = speedups(records), titles(report)
    out = ["Speed-up over NumPy (numpy ms / implementation ms, same process; above 1 = faster "
           "than NumPy), median warm ms in brackets.", "", f"Measured on: {machine_line(meta)}.", ""]
    for key in sorted({r["workload"] for r in records}):
        rows = [r for r in records if r["workload"] == key]
        sizes = sorted({r["n"] for r in rows})
        impls = list(dict.fromkeys(r["impl"] for r in rows))
        by = {(r["impl"], r["n"]): r for r in rows}
        out += [f"### {key}: `{names.get(key, '')}`", "",
                "| implementation | " + " | ".join(f"n = {_fmt_n(n)}" for n in sizes) + " |",
                "|---|" + "---|" * len(sizes)]
        notes = {}
        for impl in impls:
            cells = []
            for n in sizes:
                r = by.get((impl, n))
                if r is None:
                    cells.append("")
                elif impl == "numpy" and r["status"] == "ok":
                    cells.append(f"baseline ({r['median_ms']:.3g} ms)")
                elif r["status"] == "ok":
                    sp = s.get((key, n, impl))
                    cells.append(f"{sp:.2f}x ({r['median_ms']:.3g} ms)" if sp else f"({r['median_ms']:.3g} ms)")
                else:
                    cells.append(STATUS_LABEL.get(r["status"], r["status"]))
                    if r.get("reason"):
                        notes.setdefault((impl, r["status"], r["reason"]), []).append(_fmt_n(n))
            out.append(f"| {impl} | " + " | ".join(cells) + " |")
        out.append("")
        for (impl, status, reason), ns in notes.items():
            out.append(f"- {impl} {STATUS_LABEL.get(status, status)} at n = {', '.join(ns)}: {reason}")
        if notes:
            out.append("")
    return "\n".join(out)


def to_csv(report) -> str:
    records = report["results"]
    s, names = speedups(records), titles(report)
    base = {(r["workload"], r["n"]): r["median_ms"] for r in records if r["impl"] == "numpy" and r["status"] == "ok"}
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({"workload": r["workload"], "title": names.get(r["workload"], ""), "n": r["n"],
                    "impl": r["impl"], "status": r["status"], "median_ms": r.get("median_ms", ""),
                    "numpy_ms": base.get((r["workload"], r["n"]), ""),
                    "speedup_vs_numpy": s.get((r["workload"], r["n"], r["impl"]), ""),
                    "gbps": r.get("gbps", ""), "first_ms": r.get("first_ms", ""),
                    "compile_ms": r.get("compile_ms", ""), "reason": r.get("reason", "")})
    return buf.getvalue()


def write_tables(json_path, out_dir=None) -> tuple[Path, Path]:
    """peers.md and peers.csv (named after the JSON) in out_dir, default the JSON's folder."""
    json_path = Path(json_path)
    out_dir = Path(out_dir) if out_dir else json_path.parent
    report = load(json_path)
    md, cs = out_dir / (json_path.stem + ".md"), out_dir / (json_path.stem + ".csv")
    md.write_text(to_markdown(report))
    cs.write_text(to_csv(report))
    return md, cs


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python benchmarks/report.py RESULTS.json")
    for p in write_tables(sys.argv[1]):
        print(p)
