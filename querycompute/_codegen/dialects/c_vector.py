"""Spelling of kernel_ir.VecLoad for the C family: one wide load of a thread's run of
`count` elements into a local array of register values (lower/vector.py says when and why).

Default (CUDA, Metal): the run's bytes (2 to 16) are read as one unsigned word vector
(WORDS: uint4, uint2, ...; 64-bit elements as WORDS64, e.g. ulonglong2) through a pointer
cast, which NVRTC turns into one `ld.global.nc.v4.u32` / `.v2.u64`; each element is then
taken out of its word by a shift and a reinterpretation of its bits (BITCAST for floats,
C conversions for integers, the float16 / bool storage conversions as for scalar loads).
OpenCL overrides `vec_load` with its typed vloadN / vload_halfN, which need only element
alignment. A run of whole shaped elements (VecLoad.width) is several such loads, `width`
bytes each at consecutive offsets (words w_<name>_0, w_<name>_1, ...), into one array.

kernel_ir.VecStore is the mirror image: each register value of the thread-local array goes
to its storage bits (BITCAST, the float16 conversion `half_to_bits`, C conversions), the bits
are shifted into place and OR-ed into the words of one word vector, and that vector is
written through a pointer cast (WIDE_STORE; NVRTC: `st.global.v4.u32`). OpenCL overrides
`vec_store` with vstoreN / vstore_halfN_rte.
"""
from __future__ import annotations

from .. import dtypes as D
from ..ir import kernel_ir as K

_COMPONENTS = "xyzw"


class VectorLoads:
    VECTOR_LOADS = False                  # the printer spells VecLoad (lower/vector.vectorize runs)
    WORDS: dict[int, str] = {}            # bytes -> unsigned word vector type of that size
    WORDS64 = ""                          # 2 x 64-bit unsigned words (16 bytes)
    WIDE_LOAD = ""                        # format with {t} (word vector type) and {p} (element pointer)
    WIDE_STORE = ""                       # format with {t}, {p} and {v} (the word vector to write)

    def half_from_bits(self, bits: str) -> str:
        """float value of IEEE half bits held in an unsigned short expression."""
        raise NotImplementedError(f"{self.name}: no float16 conversion from bits")

    def half_to_bits(self, value: str) -> str:
        """IEEE half bits (an unsigned short) of a float value, rounded to nearest even."""
        raise NotImplementedError(f"{self.name}: no float16 conversion to bits")

    def _words(self, s, count: int = 0) -> tuple[int, str, int, int]:
        """(element size, word vector type, bytes per word, words) of a load of `count`
        (default s.count) elements of s.dtype."""
        size = D.itemsize(s.dtype)
        nbytes = size * (count or s.count)
        wtype = self.WORDS64 if size == 8 else self.WORDS[nbytes]
        wbytes = 8 if size == 8 else min(4, nbytes)
        return size, wtype, wbytes, nbytes // wbytes

    @staticmethod
    def load_chunks(s: K.VecLoad) -> tuple[int, int]:
        """(loads, elements per load) of a VecLoad: one load, or count * itemsize / width."""
        per = s.width // D.itemsize(s.dtype) if s.width else s.count
        return s.count // per, per

    def vec_load(self, s: K.VecLoad, pad: str) -> list[str]:
        loads, per = self.load_chunks(s)
        size, wtype, wbytes, words = self._words(s, per)
        base = self.kcode(s.base).text
        lines, lanes = [], []
        for q in range(loads):
            w = "w_" + s.name[2:] + (f"_{q}" if loads > 1 else "")
            ptr = f"{s.buffer} + {base}" + (f" + {q * per}" if q else "")
            lines.append(f"{pad}const {wtype} {w} = {self.WIDE_LOAD.format(t=wtype, p=ptr)};")
            for k in range(per):
                word = w if words == 1 else f"{w}.{_COMPONENTS[k * size // wbytes]}"
                shift = (k * size % wbytes) * 8
                lanes.append(self._from_bits(f"({word} >> {shift})" if shift else word, s.dtype, size < wbytes))
        return lines + [f"{pad}{self.t(s.dtype)} {s.name}[{s.count}] = {{{', '.join(lanes)}}};"]

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

    def vec_store(self, s: K.VecStore, pad: str) -> list[str]:
        size, wtype, wbytes, words = self._words(s)
        word_t = self.TYPES[f"uint{wbytes * 8}"]
        w = "wo_" + s.buffer
        parts: list[list[str]] = [[] for _ in range(words)]
        for k in range(s.count):
            bits = self._to_bits(f"{s.name}[{k}]", s.dtype)
            shift = (k * size % wbytes) * 8
            if size < wbytes:
                bits = f"(({word_t}){bits} << {shift})" if shift else f"({word_t}){bits}"
            parts[k * size // wbytes].append(bits)
        lines = []
        if words == 1:
            lines.append(f"{pad}const {wtype} {w} = {' | '.join(parts[0])};")
        else:
            lines.append(f"{pad}{wtype} {w};")
            lines += [f"{pad}{w}.{_COMPONENTS[j]} = {' | '.join(p)};" for j, p in enumerate(parts)]
        ptr = f"{s.buffer} + {self.kcode(s.base).text}"
        return lines + [pad + self.WIDE_STORE.format(t=wtype, p=ptr, v=w)]

    def _to_bits(self, value: str, dtype: str) -> str:
        """The storage bits of register value `value` of `dtype`, as an unsigned integer of
        the element's width (for bool: 0 or 1)."""
        if dtype == "float16":
            return self.half_to_bits(value)
        if dtype == "bool":
            return f"({self.TYPES['uint8']}){value}"
        if D.is_float(dtype):
            return self.bitcast(f"uint{D.bits(dtype)}", value)
        if D.is_signed(dtype):
            return f"({self.TYPES[f'uint{D.bits(dtype)}']}){value}"
        return value
