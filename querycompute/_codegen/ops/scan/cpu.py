"""The numba dialect of a scan (stage_specs.ScanSpec): a module with the combine function and
the two-pass scan over fixed chunks the cpu stage runtime calls.

    <name>_combine(acc, item, params...)   the user's combine (fastmath off, as every
                                            expression the numba dialect prints)
    <name>_totals(c0, c1, x, T, params...)  pass 1 over chunks [c0, c1) of 0..nch-2:
                                            T[c] = the left fold of chunk c's elements
    <name>_carries(x, T, params...)         (one call) C[0] = seed, C[c+1] = combine(C[c], T[c])
    <name>_chunks(c0, c1, x, out, C, params...)
                                            pass 2 over chunks [c0, c1): acc = C[c]; for
                                            each element in order: acc = combine(acc, x[i]);
                                            out[i] = acc
    <name>_step(i, x, CS, params...)        element i's running value for a pass fused
                                            after the scan (ops/scan/fused_cpu.py)
The passes over ranges of chunks run without the GIL, by the cpu backend's morsel scheduler
(backends/cpu/cpu_stages.py), each writing its own chunks' slots only.
Every output is combine applied in element order with the seed once at the front: the
aggregate rules (acc holds the earlier elements; a non-commutative combine works). A combine
not known associative (spec.in_order) has no pass 1: the carries come from one sequential
fold of the elements, seed first (C[c + 1] = the fold of chunk c's elements from C[c]), so
pass 2 computes exactly LINQ's running fold. Chunks are CHUNK elements whatever the thread
count, so the grouping, and a float result's bits, depend only on n (n <= CHUNK: one chunk,
no pass 1).
float16 arrays travel as their uint16 bits and are decoded / encoded per element. Indices
are unsigned in loads and stores, so numba emits no negative-index fix-up.
"""
from __future__ import annotations

from ...ir.stage_specs import ScanSpec
from ...dialects.numba_py import CHUNK, storage_dtype
from ...dialects.numba_py_expr import ExprPrinter, const_text, register_type
from ...dialects.numba_py_helpers import helper_source, jit_decorator
from ...dialects.numba_py_runtime import PRELUDE


def render(spec: ScanSpec, cache: bool = False) -> str:
    """The module source of `spec`'s scan (run in numba_py_runtime.namespace(); with
    `cache=True` it carries its own prelude that pulls that namespace in)."""
    if not spec.name.isidentifier():
        raise ValueError(f"ScanSpec.name {spec.name!r} is not a valid identifier")
    helpers: set = set()
    d, name = spec.dtype, spec.name
    params = "".join(f", p_{p.name}" for p in spec.params)
    ep = ExprPrinter(lambda i: "", lambda pname: f"p_{pname}", "i", helpers)
    ep.bind_var("acc", "acc")
    ep.bind_var("item", "item")
    result = ep.value(spec.combine)
    if d == "float16":
        helpers |= {("f16_decode", None), ("f16_encode", None)}
        load, store = "_f16_decode(x[np.uint64(i)])", "_f16_encode(acc)"
    else:
        load, store = "x[np.uint64(i)]", "acc"
    seed = const_text(spec.seed.value, d)
    rtype = "np.bool_" if d == "bool" else register_type(d)
    scalar, steps = jit_decorator(cache), jit_decorator(cache, nogil=True)
    body = "".join(f"    {line}\n" for line in ep.lines)
    ret = result if d == "bool" else f"{rtype}({result})"     # one type for every carry
    funcs = [
        f"{scalar}\ndef {name}_combine(acc, item{params}):\n"
        f'    """combine(acc, item): acc folds the earlier elements."""\n'
        f"{body}    return {ret}",
        f"{scalar}\ndef {name}_total(x, lo, hi{params}):\n"
        f'    """The left fold of x[lo:hi] (hi > lo)."""\n'
        f"    i = lo\n    acc = {load}\n"
        f"    for i in range(lo + 1, hi):\n"
        f"        acc = {name}_combine(acc, {load}{params})\n"
        f"    return acc",
        f"{scalar}\ndef {name}_chunk(x, out, lo, hi, acc{params}):\n"
        f'    """out[i] for i in [lo, hi), starting from the carry `acc`."""\n'
        f"    for i in range(lo, hi):\n"
        f"        acc = {name}_combine(acc, {load}{params})\n"
        f"        out[np.uint64(i)] = {store}",
    ]
    if spec.in_order:
        funcs.append(
            f"{scalar}\ndef {name}_from(x, lo, hi, acc{params}):\n"
            f'    """acc folded with x[lo:hi] in order."""\n'
            f"    for i in range(lo, hi):\n"
            f"        acc = {name}_combine(acc, {load}{params})\n"
            f"    return acc")
    if spec.in_order:
        carries = (
            f"    acc = {seed}\n"
            f"    for c in range(nch):\n"
            f"        C[c] = acc\n"
            f"        if c < nch - 1:\n"
            f"            acc = {name}_from(x, c * CHUNK, c * CHUNK + CHUNK, acc{params})\n")
        why = "in element order (one sequential pass: the combine is not known associative)"
    else:
        carries = (
            f"    acc = {seed}\n"
            f"    for c in range(nch):\n"
            f"        C[c] = acc\n"
            f"        if c < nch - 1:\n"
            f"            acc = {name}_combine(acc, T[c]{params})\n")
        why = "from the chunk totals T"
    funcs += [
        f"{steps}\ndef {name}_totals(c0, c1, x, T{params}):\n"
        f'    """Pass 1 over chunks [c0, c1) (all but the last): T[c] = chunk c\'s left fold."""\n'
        f"    for c in range(c0, c1):\n"
        f"        T[c] = {name}_total(x, c * CHUNK, c * CHUNK + CHUNK{params})",
        f"{steps}\ndef {name}_carries(x, T{params}):\n"
        f'    """C[c]: the fold of everything before chunk c, seed first, {why}."""\n'
        f"    n = x.shape[0]\n"
        f"    nch = (n + CHUNK - 1) // CHUNK\n"
        f"    C = np.empty(nch, {rtype})\n"
        f"{carries}"
        f"    return C",
        f"{steps}\ndef {name}_chunks(c0, c1, x, out, C{params}):\n"
        f'    """Pass 2 over chunks [c0, c1): each chunk\'s running values from its carry C[c]."""\n'
        f"    n = x.shape[0]\n"
        f"    for c in range(c0, c1):\n"
        f"        {name}_chunk(x, out, c * CHUNK, min(n, c * CHUNK + CHUNK), C[c]{params})",
    ]
    funcs.append(
        f"{scalar}\ndef {name}_step(i, x, CS{params}):\n"
        f'    """Element i of the scan inside a pass that visits every chunk\'s elements in order\n'
        f"    from the chunk's start (ops/scan/fused_cpu.py). CS[2c + 1] is chunk c's carry,\n"
        f"    CS[2c] its running value: the first element reads the carry, the others the running\n"
        f'    value, by index arithmetic (a branch here costs numba ~20x)."""\n'
        f"    j = np.int64(i)\n"
        f"    c2 = (j >> {CHUNK.bit_length() - 1}) << 1\n"
        f"    acc = {name}_combine(CS[c2 + np.int64((j & {CHUNK - 1}) == 0)], {load}{params})\n"
        f"    CS[c2] = acc\n"
        f"    return acc")
    header = (f'"""querycompute cpu scan {name!r} (dialect numba, generated).\n\n'
              f"dtype: {d} (stored as {storage_dtype(d)}), seed: {spec.seed.value!r}, "
              f"params: {', '.join(f'{p.name}: {p.dtype}' for p in spec.params) or 'none'}\n"
              f'Globals come from querycompute._codegen.dialects.numba_py_runtime.namespace().\n"""\n'
              f"CHUNK = {CHUNK}")
    helper_src = [helper_source(kind, ft, cache) for kind, ft in sorted(helpers, key=str)]
    text = "\n\n\n".join([header] + helper_src + funcs) + "\n"
    return (PRELUDE + text) if cache else text
