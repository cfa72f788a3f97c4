"""PTX / ptxas facts of the CUDA kernels of W1-W6 and of the map / first / any kernels, for
sm_90, without a GPU (NVRTC only): per kernel the widest global load, registers, spilled
bytes and PTX instruction count. Then, where ptxas and nvdisasm of one release are installed
(tests/sass_facts.py), the SASS: global loads and stores by width in bits, registers from
the cubin, instructions, float16 conversion instructions. Prints the markdown tables
docs/performance.md shows.

    python benchmarks/ptx_facts.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import ptx_facts as F  # noqa: E402
import sass_facts as S  # noqa: E402


def compiled():
    """(case, KernelSet, PTX, ptxas facts) of W1-W6 and the map / first / any kernels."""
    cases = [(key, q, t) for key, (q, t) in F.workloads().items()]
    cases += [(f"{kind} {d}", q, t) for d in ("float32", "float16", "int8", "int64")
              for kind, (q, t) in F.simple_kernels(d).items()]
    for key, q, t in cases:
        ks = F.cuda_kernel_set(q, t)
        yield (key, ks, *F.compile_sm90(ks))


def _role(spec) -> str:
    return spec.role + (" (strided)" if spec.variant == "strided" else "")


def rows(sets):
    for key, ks, ptx, facts in sets:
        for spec in ks.kernels:
            f = facts[spec.name]
            loads = ", ".join(f"{n} {k}" for k, n in sorted(f.loads.items()))
            yield (key, _role(spec),
                   f.widest_load_bytes(), loads, f.registers, f.spills, f.instructions,
                   "cvt.f32.f16" in F._entries(ptx)[spec.name])


def sass_rows(sets):
    for key, ks, ptx, _ in sets:
        facts = S.sass(ptx)
        for spec in ks.kernels:
            f = facts[spec.name]
            widths = [", ".join(f"{n} x {b}" for b, n in sorted(w.items(), reverse=True)) or "-"
                      for w in (f.loads, f.stores)]
            yield (key, _role(spec), *widths, f.registers, f.instructions, f.half_conversions or "")


def _table(head, rows) -> None:
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(c) if not isinstance(c, bool) else ("yes" if c else "") for c in r) + " |")


def main() -> None:
    if F.nvrtc() is None:
        sys.exit("NVRTC missing: pip install nvidia-cuda-nvrtc-cu12 cupy-cuda12x")
    sets = list(compiled())
    _table(("case", "kernel role", "widest load (B)", "global loads", "registers", "spill B",
            "PTX instructions", "cvt f16"), rows(sets))
    print()
    if S.missing():
        print(f"SASS: not inspected ({S.missing()})")
        return
    _table(("case", "kernel role", "LDG (count x bits)", "STG (count x bits)", "registers (cubin)",
            "SASS instructions", "f16 conversions"), sass_rows(sets))


if __name__ == "__main__":
    main()
