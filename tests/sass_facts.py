"""What the GPU runs (SASS) for a CUDA KernelSet on sm_90, without a GPU: NVRTC's PTX
(ptx_facts.compile_sm90) assembled by ptxas and disassembled by nvdisasm, per kernel its
registers (the cubin's EIATTR_REGCOUNT), instructions, global loads and stores by width and
float16 conversion instructions. Shared by tests/test_issue18_sass.py and
benchmarks/ptx_facts.py (the table in docs/performance.md).

Why ptxas and not NVRTC's own cubin: nvdisasm reads only cubins of its own release, and the
nvdisasm on PyPI (13.x) rejects NVRTC 12.9's ("invalid ELF"). PyPI's nvidia-cuda-nvcc (13.x)
ships a ptxas of the same release, which assembles NVRTC 12's PTX (PTX is forward
compatible); `tools()` finds the pair on PATH or in the nvidia wheels and insists on one
major version.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

ARCH = "sm_90"
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_TEXT = re.compile(r"^//-+ \.text\.(\w+)\s+-+$", re.M)
_REGCOUNT = re.compile(r"\.word\s+index@\((\w+)\)\s*\n\s*/\*\w+\*/\s*\.word\s+(0x[0-9a-fA-F]+)")


@dataclass(frozen=True)
class SassFacts:
    name: str
    registers: int              # from the cubin (EIATTR_REGCOUNT)
    instructions: int           # SASS instructions, NOP padding left out
    loads: dict                 # LDG width in bits -> count
    stores: dict                # STG width in bits -> count
    opcodes: Counter            # full opcode (FADD, LOP3.LUT, F2FP.F16.F32.PACK_AB...) -> count
    text: str = field(default="", repr=False)     # the kernel's SASS listing

    def count(self, prefix: str) -> int:
        """Instructions whose opcode is `prefix` or starts with `prefix.` (LOP3 -> LOP3.LUT)."""
        return sum(n for op, n in self.opcodes.items() if op == prefix or op.startswith(prefix + "."))

    def widest(self, kind: str) -> int:
        """Widest global load ("loads") or store ("stores"), in bytes (0: none)."""
        return max(getattr(self, kind), default=0) // 8

    @property
    def half_conversions(self) -> int:
        """The hardware's float <-> half instructions (F2FP.F16.F32..., F2F.F16.F32,
        HADD2.F32 for half -> float)."""
        return sum(n for op, n in self.opcodes.items() if op.startswith("HADD2.F32")
                   or (op.startswith(("F2F.", "F2FP.")) and "F16" in op))


def _find(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for site in sys.path:
        hits = sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", name)))
        if hits:
            return hits[-1]
    return None


def _major(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"release (\d+)\.", out)
    return m.group(1) if m else "?"


def tools() -> tuple[str, str]:
    """(ptxas, nvdisasm) of one CUDA major release; raises LookupError saying what to install."""
    ptxas, nvdisasm = _find("ptxas"), _find("nvdisasm")
    if ptxas is None or nvdisasm is None:
        raise LookupError("ptxas / nvdisasm missing: pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm "
                          "(the `test` extra, Linux)")
    a, b = _major(ptxas), _major(nvdisasm)
    if a != b:
        raise LookupError(f"ptxas ({ptxas}, CUDA {a}) and nvdisasm ({nvdisasm}, CUDA {b}) are of different "
                          f"releases: nvdisasm reads only cubins of its own")
    return ptxas, nvdisasm


def missing() -> str | None:
    """Why the SASS checks cannot run here, or None."""
    try:
        tools()
        return None
    except LookupError as exc:
        return str(exc)


def sass(ptx: str, arch: str = ARCH) -> dict[str, SassFacts]:
    """Facts per kernel of NVRTC's `ptx`, assembled for `arch`."""
    ptxas, nvdisasm = tools()
    with tempfile.TemporaryDirectory(prefix="qc-sass-") as tmp:
        src, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, f"-arch={arch}", src, "-o", cubin], capture_output=True, text=True,
                              timeout=300)
        if done.returncode:
            raise RuntimeError(f"ptxas {arch}: {done.stderr}")
        done = subprocess.run([nvdisasm, cubin], capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise RuntimeError(f"nvdisasm: {done.stderr}")
    return parse(done.stdout)


def parse(listing: str) -> dict[str, SassFacts]:
    """SassFacts per kernel of an nvdisasm listing of a whole cubin."""
    registers = {}
    for block in listing.split("//----- nvinfo : ")[1:]:    # EIATTR_REGCOUNT: index@(kernel), count
        if block.startswith("EIATTR_REGCOUNT") and (m := _REGCOUNT.search(block)):
            registers[m.group(1)] = int(m.group(2), 16)
    starts = [(m.end(), m.group(1)) for m in _TEXT.finditer(listing)]
    facts = {}
    for j, (at, name) in enumerate(starts):
        body = listing[at: starts[j + 1][0] if j + 1 < len(starts) else len(listing)]
        ops = [m.group(1) for m in _INSTR.finditer(body)]
        ops = [op for op in ops if op != "NOP"]
        facts[name] = SassFacts(name, registers.get(name, -1), len(ops),
                                _widths(ops, "LDG"), _widths(ops, "STG"),
                                Counter(ops), body)
    return facts


def _widths(ops, kind: str) -> dict[int, int]:
    """Bit width -> count of the `kind` (LDG / STG) instructions: LDG.E.128 is 128 bits,
    LDG.E.U16 16, LDG.E.ENL2.256 256, a plain LDG.E 32."""
    out: Counter = Counter()
    for op in ops:
        parts = op.split(".")
        if parts[0] != kind:
            continue
        bits = 32
        for p in parts[1:]:
            if p.isdigit():
                bits = int(p)
            elif re.fullmatch(r"[US](8|16)", p):
                bits = int(p[1:])
        out[bits] += 1
    return dict(out)
