"""Spelling of kernel_ir.VecLoad for the C family: one wide load of a thread's run of
`count` elements into a local array of register values (lower_vector.py says when and why).

Default (CUDA, Metal): the run's bytes (2 to 16) are read as one unsigned word vector
(WORDS: uint4, uint2, ...; 64-bit elements as WORDS64, e.g. ulonglong2) through a pointer
cast, which NVRTC turns into one `ld.global.nc.v4.u32` / `.v2.u64`; each element is then
taken out of its word by a shift and a reinterpretation of its bits (BITCAST for floats,
C conversions for integers, the float16 / bool storage conversions as for scalar loads).
OpenCL overrides `vec_load` with its typed vloadN / vload_halfN, which need only element
alignment.
"""
from __future__ import annotations

from .. import dtypes as D
from .. import kernel_ir as K

_COMPONENTS = "xyzw"


class VectorLoads:
    VECTOR_LOADS = False                  # the printer spells VecLoad (lower_vector.vectorize runs)
    WORDS: dict[int, str] = {}            # bytes -> unsigned word vector type of that size
    WORDS64 = ""                          # 2 x 64-bit unsigned words (16 bytes)
    WIDE_LOAD = ""                        # format with {t} (word vector type) and {p} (element pointer)

    def half_from_bits(self, bits: str) -> str:
        """float value of IEEE half bits held in an unsigned short expression."""
        raise NotImplementedError(f"{self.name}: no float16 conversion from bits")

    def vec_load(self, s: K.VecLoad, pad: str) -> list[str]:
        size = D.itemsize(s.dtype)
        nbytes = size * s.count
        wtype = self.WORDS64 if size == 8 else self.WORDS[nbytes]
        wbytes = 8 if size == 8 else min(4, nbytes)
        words = nbytes // wbytes
        w = "w_" + s.name[2:]
        ptr = f"{s.buffer} + {self.kcode(s.base).text}"
        lanes = []
        for k in range(s.count):
            word = w if words == 1 else f"{w}.{_COMPONENTS[k * size // wbytes]}"
            shift = (k * size % wbytes) * 8
            lanes.append(self._from_bits(f"({word} >> {shift})" if shift else word, s.dtype, size < wbytes))
        return [f"{pad}const {wtype} {w} = {self.WIDE_LOAD.format(t=wtype, p=ptr)};",
                f"{pad}{self.t(s.dtype)} {s.name}[{s.count}] = {{{', '.join(lanes)}}};"]

    def _from_bits(self, bits: str, dtype: str, narrow: bool) -> str:
        """The register value of `dtype` whose storage bits are the low bits of `bits` (an
        unsigned word; `narrow`: the element is narrower than the word)."""
        if dtype in ("bool", "float16") or (narrow and not D.is_signed(dtype)):
            unsigned = self.TYPES["uint8" if dtype == "bool" else f"uint{D.bits(dtype)}"]
            bits = f"({unsigned}){bits}" if narrow else bits
        if dtype == "bool":
            return f"({bits} != 0)"
        if dtype == "float16":
            return self.half_from_bits(bits)
        if D.is_float(dtype):
            return self.bitcast(dtype, bits)
        if D.is_signed(dtype):
            return f"({self.t(dtype)}){bits}"
        return bits
