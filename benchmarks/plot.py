"""Plot a peers.json: one panel per workload (titled with its query), the speed-up over NumPy
against n, one line per implementation.

    python benchmarks/plot.py results/peers.json results/peers.png

The y axis is numpy's median ms over the implementation's (report.speedups), log scale, with
NumPy itself the dashed line at 1: above it is faster than NumPy. Implementations that were
not timed at some n are not dropped: an X at the foot of the panel marks each such n (WRONG,
error, fallback), a hollow circle marks n/a, and a box in the panel names them with the
reason. The figure's footer carries the machine, the versions, the date and the samples.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")        # no display here; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report as R  # noqa: E402


def _not_timed_lines(rows) -> list[str]:
    notes, why = {}, {}
    for r in rows:
        if r["status"] != "ok":
            key = (r["impl"], R.STATUS_LABEL.get(r["status"], r["status"]))
            notes.setdefault(key, []).append(f"{r['n']:.0e}".replace("e+0", "e"))
            why.setdefault(key, r.get("reason", ""))      # the first n's reason stands for all
    return [f"{impl}: {label} at n={','.join(ns)}" + (f" ({why[impl, label]})" if why[impl, label] else "")
            for (impl, label), ns in notes.items()]


def build_figure(report):
    """The matplotlib Figure for a peers.json already loaded (a dict)."""
    records, meta = report["results"], report.get("meta", {})
    speed, names = R.speedups(records), R.titles(report)
    keys = sorted({r["workload"] for r in records})
    cols = min(3, len(keys))
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.4 * rows + 0.9), squeeze=False)
    # one colour per implementation across all panels, so a line is found by colour alone
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    impls = [i for i in dict.fromkeys(r["impl"] for r in records) if i != "numpy"]
    colour = {impl: palette[i % len(palette)] for i, impl in enumerate(impls)}
    for ax, key in zip(axes.flat, keys):
        rows_k = [r for r in records if r["workload"] == key]
        foot = blended_transform_factory(ax.transData, ax.transAxes)
        for impl in impls:
            labelled = False
            pts = sorted((r["n"], speed[(key, r["n"], impl)]) for r in rows_k
                         if r["impl"] == impl and (key, r["n"], impl) in speed)
            if pts:
                style = "-o" if impl.startswith("qc-") else "--."
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=impl, color=colour[impl])
            for r in rows_k:
                if r["impl"] == impl and r["status"] != "ok":
                    hollow = r["status"] == "n/a"
                    ax.plot([r["n"]], [0.03], "o" if hollow else "X", transform=foot, clip_on=False,
                            color=colour[impl], markerfacecolor="none" if hollow else colour[impl],
                            label=None if pts or labelled else f"{impl} (not timed)")
                    labelled = True
        ax.axhline(1.0, color="black", linestyle=":", linewidth=1, label="numpy (= 1)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{key}: {names.get(key, '')}", fontsize=9)
        ax.set_xlabel("n elements")
        ax.set_ylabel("speed-up over numpy (x, higher is faster)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        notes = _not_timed_lines(rows_k)
        if notes:
            text = "\n".join(textwrap.shorten(n, 70) for n in notes)
            ax.text(0.98, 0.09, "not timed:\n" + text, transform=ax.transAxes, fontsize=6, ha="right",
                    va="bottom", bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85})
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.suptitle("querycompute and peers: speed-up over NumPy (numpy median ms / implementation's)")
    fig.text(0.01, 0.005, textwrap.fill(R.machine_line(meta), 180), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    return fig


def plot_file(json_path, png_path) -> Path:
    fig = build_figure(R.load(json_path))
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return Path(png_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python benchmarks/plot.py RESULTS.json OUT.png")
    print(plot_file(sys.argv[1], sys.argv[2]))
