"""Source rewrites that let g++ compile a CUDA C or MSL kernel for the CPU harness.

C++ has no block-scoped storage, no kernel-parameter attributes and no inline PTX, so three
things are rewritten; everything else is left to the preludes (include/cuda_prelude.h,
include/metal_stdlib):

* block-shared declarations (`__shared__ float s[256];`, `threadgroup float s[8];`) become
  references into the per-block arena: `auto& s = ::qch::shared_object<float[256]>();`
  (every thread allocates in the same order, so every thread of a block gets the same storage);
* Metal kernel signatures: `[[buffer(i)]]` parameters stay, sorted by i (so arguments are
  bound in buffer-index order); thread-position parameters become locals initialised from
  the harness's thread context;
* the PTX conversions the CUDA printer writes inline (`asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h)
  : "f"(f));`) become calls of their models in cuda_prelude.h (`h = ::qch::cvt_rn_f16_f32(f);`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_TYPE = r"[A-Za-z_][\w:<>, ]*?"
_SHARED_CUDA = re.compile(
    r"(?P<vol1>volatile\s+)?__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?(?P<vol2>volatile\s+)?"
    rf"(?P<type>{_TYPE})\s+(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]+\]\s*)*);")
_EXTERN_SHARED_CUDA = re.compile(
    rf"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?(?P<type>{_TYPE})\s+"
    r"(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;")
_SHARED_METAL = re.compile(
    rf"(?m)^(?P<indent>[ \t]*)threadgroup\s+(?P<type>{_TYPE})\s+(?P<name>[A-Za-z_]\w*)\s*"
    r"(?P<dims>(?:\[[^\]]+\]\s*)*);")
_CUDA_CVT = re.compile(r'asm\(\s*"cvt\.(?P<op>[a-z0-9.]+)\s+%0,\s*%1;"\s*:\s*"=\w"\((?P<out>\w+)\)'
                       r'\s*:\s*"\w"\((?P<arg>\w+)\)\s*\);')
_CUDA_KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?([A-Za-z_]\w*)\s*\(")
_METAL_KERNEL = re.compile(r"\bkernel\s+void\s+([A-Za-z_]\w*)\s*\(")
_ATTRIBUTE = re.compile(r"\[\[\s*([A-Za-z_]\w*)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]")
_MAX_THREADS = re.compile(r"\[\[\s*max_total_threads_per_threadgroup\s*\(\s*(\d+)\s*\)\s*\]\]\s*$")

METAL_BUILTINS = (
    "thread_position_in_grid", "threadgroup_position_in_grid", "thread_position_in_threadgroup",
    "threads_per_threadgroup", "threadgroups_per_grid", "threads_per_grid",
    "thread_index_in_threadgroup", "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup",
    "threads_per_simdgroup", "simdgroups_per_threadgroup", "thread_execution_width",
    "dispatch_threads_per_threadgroup",
)


class RewriteError(ValueError):
    """The source uses a construct the harness cannot model; the message names it."""


@dataclass(frozen=True)
class KernelInfo:
    name: str
    buffer_indices: tuple[int, ...] = ()   # Metal: [[buffer(i)]] of each argument, in order
    max_threads: int | None = None         # Metal: [[max_total_threads_per_threadgroup(n)]]


def _shared_ref(name: str, type_: str, dims: str, volatile: bool) -> str:
    dims = re.sub(r"\s+", "", dims)
    vol = "volatile " if volatile else ""
    return f"auto& {name} = ::qch::shared_object<{vol}{type_.strip()}{dims}>();"


def rewrite_cuda(source: str) -> tuple[str, list[KernelInfo]]:
    source = _EXTERN_SHARED_CUDA.sub(
        lambda m: f"{m['type'].strip()}* {m['name']} = "
                  f"reinterpret_cast<{m['type'].strip()}*>(::qch::dynamic_shared());", source)
    source = _SHARED_CUDA.sub(
        lambda m: _shared_ref(m["name"], m["type"], m["dims"], bool(m["vol1"] or m["vol2"])), source)
    source = _CUDA_CVT.sub(lambda m: f"{m['out']} = ::qch::cvt_{m['op'].replace('.', '_')}({m['arg']});", source)
    if re.search(r"\basm\s*\(", source):
        raise RewriteError("inline PTX other than a cvt conversion: the harness has no model of it")
    kernels = [KernelInfo(name) for name in _CUDA_KERNEL.findall(source)]
    if not kernels:
        raise RewriteError("no `__global__ void name(...)` kernel found in the CUDA source")
    return source, kernels


def _matching(text: str, open_at: int, open_ch: str = "(", close_ch: str = ")") -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise RewriteError(f"unbalanced {open_ch!r} at offset {open_at} in the Metal source")


def _split_params(params: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in params:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _metal_signature(name: str, params: str) -> tuple[str, str, KernelInfo]:
    """-> (new parameter list, locals to declare at the top of the body, info)."""
    buffers, locals_ = [], []
    for param in _split_params(params):
        attrs = _ATTRIBUTE.findall(param)
        decl = _ATTRIBUTE.sub("", param).strip()
        m = re.match(r"(?s)(.*?)([A-Za-z_]\w*)\s*$", decl)
        if not attrs or not m:
            raise RewriteError(f"kernel {name}: parameter {param!r} has no [[attribute]]")
        attr, index = attrs[0]
        if attr == "buffer":
            buffers.append((int(index), decl))
        elif attr in METAL_BUILTINS:
            type_, var = m.group(1).strip(), m.group(2)
            locals_.append(f"{type_} {var} = ::qch::metal_builtin_as<{type_}>(::qch::{attr});")
        else:
            raise RewriteError(f"kernel {name}: parameter attribute [[{attr}]] is not modelled "
                               f"by the harness (supported: buffer, {', '.join(METAL_BUILTINS)})")
    buffers.sort()
    info = KernelInfo(name, tuple(i for i, _ in buffers))
    return ", ".join(d for _, d in buffers), " ".join(locals_), info


def rewrite_metal(source: str) -> tuple[str, list[KernelInfo]]:
    source = _SHARED_METAL.sub(
        lambda m: m["indent"] + _shared_ref(m["name"], m["type"], m["dims"], False), source)
    kernels, out, pos = [], [], 0
    for m in _METAL_KERNEL.finditer(source):
        close = _matching(source, m.end() - 1)
        brace = source.index("{", close)
        params, locals_, info = _metal_signature(m[1], source[m.end():close])
        limit = _MAX_THREADS.search(source, pos, m.start())
        if limit:
            info = KernelInfo(info.name, info.buffer_indices, int(limit[1]))
        out.append(source[pos:m.start()])
        out.append(f"void {m[1]}({params}) {{ {locals_}")
        pos = brace + 1
        kernels.append(info)
    out.append(source[pos:])
    if not kernels:
        raise RewriteError("no `kernel void name(...)` found in the Metal source")
    return "".join(out), kernels
