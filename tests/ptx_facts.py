"""What NVRTC and ptxas make of a CUDA KernelSet for sm_90, without a GPU: the PTX, and per
kernel its registers, spills, global loads by width and instruction count. Shared by
tests/test_issue18_ptx.py and benchmarks/ptx_facts.py (the table in docs/performance.md).
Also the W1-W6 queries (DESIGN.md section 8) as passes: their lambdas live here because the
frontend reads lambda source."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

import querycompute as qc
from querycompute._codegen.gpu import render
from querycompute.api.introspect import lower_for

ARCH = "sm_90"
_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_LOAD = re.compile(r"\bld\.global(?:\.nc)?((?:\.v[24])?)\.(\w+)")


@dataclass(frozen=True)
class KernelFacts:
    name: str
    registers: int
    spills: int                 # bytes of spill stores + loads
    loads: dict                 # ld.global width ("v4.u32", "f32", ...) -> count
    instructions: int           # PTX instructions in the entry (lines ending with ';')

    def widest_load_bytes(self) -> int:
        best = 0
        for kind in self.loads:
            lanes = int(kind[1]) if kind.startswith("v") else 1
            best = max(best, lanes * int(re.sub(r"\D", "", kind.split(".")[-1]) or 8) // 8)
        return best


def nvrtc():
    """cupy's NVRTC bindings, or None when they (or the library) are missing."""
    try:
        from cupy_backends.cuda.libs import nvrtc as lib
        lib.getVersion()
        return lib
    except Exception:
        return None


def compile_sm90(ks) -> tuple[str, dict[str, KernelFacts]]:
    """(PTX, facts per kernel name) of a CUDA KernelSet; raises RuntimeError with the log."""
    lib = nvrtc()
    prog = lib.createProgram(ks.source, f"{ks.pass_name}.cu", [], [])
    try:
        lib.compileProgram(prog, [f"--gpu-architecture={ARCH}", *ks.options, "--ptxas-options=-v"])
    except lib.NVRTCError as exc:
        raise RuntimeError(f"NVRTC {ARCH}: {exc}\n{lib.getProgramLog(prog)}\n{ks.source}") from None
    log = lib.getProgramLog(prog)
    log = log.decode() if isinstance(log, bytes) else log
    ptx = lib.getPTX(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    lib.destroyProgram(prog)
    if not _ENTRY.search(log):
        log = _ptxas_report(ptx) or log     # an NVRTC (13) that prints no ptxas report for PTX
    regs, spills, current = {}, {}, None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
        elif current and (m := _USED.search(line)):
            regs[current] = int(m.group(1))
        elif current and (m := _SPILL.search(line)):
            spills[current] = int(m.group(1)) + int(m.group(2))
    facts = {}
    for name, body in _entries(ptx).items():
        loads: dict[str, int] = {}
        for m in _LOAD.finditer(body):
            kind = (m.group(1)[1:] + "." if m.group(1) else "") + m.group(2)
            loads[kind] = loads.get(kind, 0) + 1
        count = sum(1 for ln in body.splitlines() if ln.strip().endswith(";") and not ln.strip().startswith("."))
        facts[name] = KernelFacts(name, regs.get(name, -1), spills.get(name, 0), loads, count)
    return ptx, facts


def _ptxas_report(ptx: str) -> str | None:
    """`ptxas -v`'s report on the PTX (registers, spills per entry), or None without ptxas."""
    import subprocess
    import tempfile
    from pathlib import Path

    from sass_facts import _find
    ptxas = _find("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        done = subprocess.run([ptxas, "-v", f"-arch={ARCH}", str(src), "-o", str(Path(tmp) / "k.cubin")],
                              capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr if done.returncode == 0 else None


def _entries(ptx: str) -> dict[str, str]:
    """PTX text of each .entry, by name."""
    out, starts = {}, [(m.start(), m.group(1)) for m in re.finditer(r"\.entry (\w+)\(", ptx)]
    for k, (at, name) in enumerate(starts):
        out[name] = ptx[at: starts[k + 1][0] if k + 1 < len(starts) else len(ptx)]
    return out


# ---- W1-W6 (DESIGN.md section 8) and the map / first / any kernels, as CUDA KernelSets ----
def _x(dtype: str, n: int = 64):
    return (np.arange(n) % 100).astype(dtype)


def workloads() -> dict:
    """key -> (query, terminal) for W1-W6 on float32 data."""
    x, a, b = _x("float32"), _x("float32"), _x("float32")
    table = {"price": _x("float32"), "qty": _x("int32"), "cat": _x("int32")}
    return {
        "W1": (qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100), "sum"),
        "W2": (qc.query(x).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1), "to_array"),
        "W3": (qc.query(x), qc.count(lambda v: 500 < v < 1500)),
        "W4": (qc.query(a, b).select(lambda a, b: a * b + 1), "sum"),
        "W5": (qc.query(x).where(lambda v: v > 10).select(lambda v: np.sqrt(v) + 1), qc.agg(mean=qc.mean, peak=qc.max)),
        "W6": (qc.query(table).where(lambda r: r.cat == 3 and r.qty > 2), qc.sum(lambda r: r.price * r.qty)),
    }


def simple_kernels(dtype: str) -> dict:
    """map (x * 2 + 1), first (x > 3) and any (x > 3) on one input of `dtype`."""
    x = _x(dtype)
    return {"map": (qc.query(x).select(lambda v: v * 2 + 1), "to_array"),
            "first": (qc.query(x), qc.first(lambda v: v > 3)),
            "any": (qc.query(x), qc.any(lambda v: v > 3))}


def cuda_kernel_set(query, terminal):
    lowered, *_ = lower_for(query, terminal)
    return render(lowered.pass_, "cuda")
