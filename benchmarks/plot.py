"""Plot a peers.json: one panel per workload, median time against n (log-log), one line per
implementation. Usable alone: python benchmarks/plot.py results/peers.json results/peers.png"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")        # no display here; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402


def plot_file(json_path, png_path) -> Path:
    results = json.loads(Path(json_path).read_text())["results"]
    keys = sorted({r["workload"] for r in results})
    cols = min(3, len(keys))
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    # one colour per implementation across all panels, so a line is found by colour alone
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {impl: palette[i % len(palette)]
              for i, impl in enumerate(dict.fromkeys(r["impl"] for r in results))}
    for ax, key in zip(axes.flat, keys):
        ok = [r for r in results if r["workload"] == key and r["status"] == "ok"]
        for impl in dict.fromkeys(r["impl"] for r in ok):
            pts = sorted((r["n"], r["median_ms"]) for r in ok if r["impl"] == impl)
            style = "-o" if impl.startswith("qc-") else "--."
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=impl, color=colour[impl])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(key)
        ax.set_xlabel("n elements")
        ax.set_ylabel("median ms (warm)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return Path(png_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python benchmarks/plot.py RESULTS.json OUT.png")
    print(plot_file(sys.argv[1], sys.argv[2]))
