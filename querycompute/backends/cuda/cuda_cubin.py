"""Reading a CUBIN out of NVRTC whole, and checking that an ELF image is complete.

CuPy's `nvrtc.getCUBIN` strips a trailing NUL as if the CUBIN were a C string like the PTX, so
it returns one byte less than `nvrtcGetCUBINSize` reports: the last program header is cut and
the driver / nvdisasm reject (or misread) the image. We call `nvrtcGetCUBINSize` and
`nvrtcGetCUBIN` ourselves, on the very library CuPy loaded (dlopen with RTLD_NOLOAD: a second
copy of NVRTC would not know CuPy's program handles).
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
from functools import lru_cache

from ...errors import BackendUnavailableError


@lru_cache(maxsize=None)
def _loaded_nvrtc(major: int):
    """The NVRTC shared library CuPy already loaded, as a ctypes library, or None."""
    if sys.platform == "win32":
        names, mode = [f"nvrtc64_{major}0_0.dll"], 0    # an already-loaded DLL is reused
    else:
        names = [f"libnvrtc.so.{major}", "libnvrtc.so"]
        mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_NOW", 2)
    for name in names:
        try:
            lib = ctypes.CDLL(name, mode=mode)
        except OSError:
            continue
        for fn in (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN):
            fn.restype = ctypes.c_int
        lib.nvrtcGetCUBINSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        lib.nvrtcGetCUBIN.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        return lib
    return None


def read_cubin(mod, prog: int) -> bytes:
    """The whole CUBIN of a compiled NVRTC program (`mod` is cupy.cuda.nvrtc, `prog` the
    handle its createProgram returned)."""
    lib = _loaded_nvrtc(mod.getVersion()[0])
    if lib is not None:
        size = ctypes.c_size_t()
        status = lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        if status == 0:
            buf = ctypes.create_string_buffer(size.value)
            status = lib.nvrtcGetCUBIN(prog, buf)
        if status != 0:
            mod.check_status(status)     # raises NVRTCError with NVRTC's message
        cubin = buf.raw[:size.value]
    else:                                # library not reachable: CuPy's copy, if it is whole
        cubin = mod.getCUBIN(prog)
    end = elf_extent(cubin)
    if end > len(cubin):
        raise BackendUnavailableError(
            f"NVRTC returned an incomplete CUBIN ({len(cubin)} bytes, its ELF headers span "
            f"{end}); set QUERYCOMPUTE_CUDA_ARCH=compute_NN to load PTX instead")
    return cubin


def elf_extent(data: bytes) -> int:
    """How many bytes a 64-bit little-endian ELF image's headers say it spans: the end of the
    header tables and of every section / segment stored in the file. A complete image has
    elf_extent(data) <= len(data); a truncated one reports more (or 2**63 when even the
    tables can't be read)."""
    broken = 1 << 63
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return broken
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    ehsize, phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHHH", data, 0x34)
    end = max(ehsize, phoff + phentsize * phnum, shoff + shentsize * shnum)
    if end > len(data):
        return end
    for i in range(shnum):                    # sections: type, offset, size
        base = shoff + i * shentsize
        (kind,) = struct.unpack_from("<I", data, base + 4)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        if kind != 8:                         # SHT_NOBITS (.bss) occupies no file bytes
            end = max(end, offset + size)
    for i in range(phnum):                    # segments: offset, size in the file
        base = phoff + i * phentsize
        (offset,) = struct.unpack_from("<Q", data, base + 8)
        (filesz,) = struct.unpack_from("<Q", data, base + 0x20)
        end = max(end, offset + filesz)
    return end
