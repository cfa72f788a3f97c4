"""PTX / ptxas facts of the CUDA kernels of W1-W6 and of the map / first / any kernels, for
sm_90, without a GPU (NVRTC only): per kernel the widest global load, registers, spilled
bytes and PTX instruction count. Prints the markdown table docs/performance.md shows.

    python benchmarks/ptx_facts.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import ptx_facts as F  # noqa: E402


def rows():
    cases = [(key, q, t) for key, (q, t) in F.workloads().items()]
    cases += [(f"{kind} {d}", q, t) for d in ("float32", "float16", "int8", "int64")
              for kind, (q, t) in F.simple_kernels(d).items()]
    for key, q, t in cases:
        ks = F.cuda_kernel_set(q, t)
        ptx, facts = F.compile_sm90(ks)
        for spec in ks.kernels:
            f = facts[spec.name]
            loads = ", ".join(f"{n} {k}" for k, n in sorted(f.loads.items()))
            yield (key, spec.role + (" (strided)" if spec.variant == "strided" else ""),
                   f.widest_load_bytes(), loads, f.registers, f.spills, f.instructions,
                   "cvt.f32.f16" in F._entries(ptx)[spec.name])


def main() -> None:
    if F.nvrtc() is None:
        sys.exit("NVRTC missing: pip install nvidia-cuda-nvrtc-cu12 cupy-cuda12x")
    print("| case | kernel role | widest load (B) | global loads | registers | spill B | PTX instructions | cvt f16 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows():
        print("| " + " | ".join(str(c) if not isinstance(c, bool) else ("yes" if c else "") for c in r) + " |")


if __name__ == "__main__":
    main()
