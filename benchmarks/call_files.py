"""How many of querycompute's files one call enters: the first call in a fresh process (cold:
its plan is made, its kernel loaded or compiled) and the second (warm: the memo's entry).

    python benchmarks/call_files.py [--backend cpu]

Counts the package's source files whose functions run during the call (sys.setprofile,
after `import querycompute` and the input's creation). What a module's first import runs
(its body, class bodies, functions called from them) is not counted: a file counts when one
of its functions is called by the query's own work, for a fused chain (W1:
select.where.select.sum) and a staged one (where.order_by.take.to_array), their lambdas given
as text (a `python -c` child has no source to read). Issue 27 measured
46 (fused) and 72 (staged) files for a cold cpu call before the package was laid out in layers.
Each chain runs in its own process, so nothing of the other is loaded.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, sys
import numpy as np
import querycompute as qc
pkg = os.path.dirname(qc.__file__)
x = (np.random.default_rng(0).random(1000) * 2000).astype(np.float32)
chains = {
    "fused": lambda b: qc.query(x).on(b).select("lambda v: v * 2").where("lambda v: v > 1000")
                         .select("lambda v: v + 1").sum(),
    "staged": lambda b: qc.query(x).on(b).where("lambda v: v > 100").order_by("lambda v: -v").take(10).to_array(),
}
run = chains[sys.argv[1]]
backend = sys.argv[2]
out = {}
for label in ("cold", "warm"):
    seen = set()
    def prof(frame, event, arg, seen=seen):
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(pkg) or not code.co_flags & 1:
            return                    # (co_flags & CO_OPTIMIZED: a function, not a module/class body)
        up = frame.f_back
        while up is not None:         # a function run by a first import's module body: not counted
            if up.f_code.co_filename.startswith("<frozen importlib"):
                return
            up = up.f_back
        seen.add(os.path.relpath(code.co_filename, pkg))
    sys.setprofile(prof)
    run(backend)
    sys.setprofile(None)
    out[label] = sorted(seen)
print(json.dumps(out))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--list", action="store_true", help="print the files, not only their number")
    args = ap.parse_args(argv)
    env = dict(os.environ, QUERYCOMPUTE_TIERED="0")
    for chain in ("fused", "staged"):
        done = subprocess.run([sys.executable, "-c", CHILD, chain, args.backend], env=env,
                              capture_output=True, text=True, check=True)
        got = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{chain:>6} chain on {args.backend}: cold call enters {len(got['cold'])} files, "
              f"warm call {len(got['warm'])}")
        if args.list:
            for label in ("cold", "warm"):
                print(f"  {label}: " + " ".join(got[label]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
