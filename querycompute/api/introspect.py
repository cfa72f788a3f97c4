"""`.source()` and `.explain()`: show what a query compiles to, without running it.

Both work on any machine: they lower the query for the requested terminal and ask the
backend for its source / launch shapes, which need no device.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from querycompute._codegen import elements, gpu, pretty
from querycompute._codegen.dialects.numba_py import CHUNK, whole_arrays
from querycompute._codegen.ir.program import Reduce

from ..graph import terminals as T
from ..run import engine, windows
from ..backends import registry
from ..backends.gpu.gpu_elements import whole
from ..graph.graph import PLAIN, POSITIONAL, Count, Terminal, heavy
from ..errors import QueryError, codegen_errors
from ..frontend.exact import origin
from ..frontend.strings import is_string_param, origin as string_origin
from ..plan.plan import lower_query
from .query_terminals import positional
from .explain_stages import on_gpu, origin_note
from ..sources.shaped import columns as shaped_columns


def terminal_request(terminal: Any) -> Terminal:
    """A terminal given by name ("sum"), by spec (qc.sum(f)) or as qc.agg(...)."""
    if isinstance(terminal, tuple) and len(terminal) == 2 and terminal[0] in POSITIONAL:
        name, arg = terminal            # ("element_at", 3), ("last", pred), ("single", None)
        return positional(name, Count(arg or 0) if name == "element_at" else arg, T.NO_DEFAULT)
    if isinstance(terminal, str):
        if terminal in POSITIONAL:
            return positional(terminal, Count(0) if terminal == "element_at" else None, T.NO_DEFAULT)
        if terminal in PLAIN:
            return PLAIN[terminal]
        raise QueryError(f"unknown terminal {terminal!r}; use one of {', '.join(sorted(PLAIN) + list(POSITIONAL))}, "
                         f"an aggregate spec such as qc.sum(lambda v: v * v), or qc.agg(...)")
    if isinstance(terminal, T.AggSpec):
        return Terminal(terminal.kind, ((terminal.kind, terminal),))
    if isinstance(terminal, T.AggBundle):
        return Terminal("agg", terminal.specs, standalone=False)
    raise QueryError(f"terminal must be a name, an aggregate spec or qc.agg(...), got {terminal!r}")


def lower_for(q, terminal: Any):
    term = terminal_request(terminal)
    lowered, cols, infos = lower_query(q, term, engine.run_side)
    return lowered, term, cols, infos


def source(q, backend: str, terminal: Any) -> str:
    backend = "webgpu" if backend == "wgsl" else backend     # the dialect's own name
    lowered, *_ = lower_for(q, terminal)
    if getattr(lowered, "row_plan", None) is not None:      # long rows (rows.py)
        return lowered.row_plan.source(backend)
    if getattr(lowered, "staged", False):
        from . import explain_stages
        from ..run import pipeline
        from ..plan.group_narrow import for_backend
        return explain_stages.source(for_backend(lowered, backend), backend, pipeline.stage_runtime(backend))
    with codegen_errors(backend):
        return registry.get(backend).source(lowered.pass_)


_OP_TEXT = {"map": "elementwise: every element computed and stored",
            "compact": "order-preserving compaction: flags, scan, scatter",
            "reduce": "two-stage reduction: one partial per block, then a finalize kernel"}
# what the host backends run instead of the GPU kernels above, by where their kernels run
# (BackendCaps.device): "host" the cpu's (dialects/numba_py.py), "reference" numpy_ref.py's
_HOST_OP_TEXT = {
    "host": {"map": f"elementwise: every element computed and stored, chunks of {CHUNK} elements in parallel",
            "compact": "order-preserving compaction: a count pass (keep flags, a count per chunk), "
                       "then a write pass of the survivors at their chunk's offset",
            "reduce": f"per-chunk partial accumulators (chunks of {CHUNK} elements in parallel), "
                      f"combined in chunk order"},
    "reference": {"map": "elementwise: whole-array NumPy operations",
              "compact": "a keep mask over the whole array, then the kept elements in order",
              "reduce": "whole-array NumPy reductions"}}


def _params_text(params, bindings) -> str:
    """p0:int64 = codes[0], ...: each parameter with the captured value it carries."""
    if len(bindings) != len(params):
        return ", ".join(f"{ps.name}:{ps.dtype}" for ps in params)
    return ", ".join(f"{ps.name}:{ps.dtype}" + ("" if b[0] == "window" else
                                                 f" = {string_origin(b[1]) if is_string_param(b[1]) else origin(b[1])}")
                     for ps, b in zip(params, bindings))


# a GPU dialect with a device-scope fence (DialectCaps.device_fence) reduces in one launch
_ONE_LAUNCH_REDUCE = "one-launch reduction: one partial per block, the last block to finish folds them"


def _op_text(op: str, backend: str) -> str:
    b = registry.get(backend)
    dialect = gpu.DIALECTS.get(getattr(b, "dialect", ""))
    if op == "reduce" and b.caps.device == "gpu" and dialect is not None and dialect.CAPS.device_fence:
        return _ONE_LAUNCH_REDUCE
    return _HOST_OP_TEXT.get(b.caps.device, _OP_TEXT)[op]


def _element_bytes(dtypes) -> int:
    return sum(np.dtype(d).itemsize for d in dtypes)


def explain(q, backend: str | None, terminal: Any) -> str:
    lowered, term, cols, infos = lower_for(q, terminal)
    n = q._source.length(cols)
    name = backend or (q._backend if q._backend != "auto" else registry.choose_auto(n, False, heavy(q._kinds),
                                                                                             q._source.times is not None))
    if getattr(lowered, "row_plan", None) is not None:      # long rows (rows.py)
        return f"operation graph: {q!r}\nplan:\n  {lowered.row_plan.describe(name)}"
    if getattr(lowered, "staged", False):
        from . import explain_stages
        from ..run import pipeline
        from ..plan.group_narrow import for_backend
        return explain_stages.explain(q, for_backend(lowered, name), term, infos, name, n,
                                      pipeline.stage_runtime(name))
    p = lowered.pass_
    src = q._source
    out = ["operation graph:"]
    if src.kind == "range":
        out.append(f"  source: range{src.range_args} -> int64, n={n}")
    else:
        strings = src._table.strings if src._table is not None else ()
        desc = ", ".join((f"{f}:str as {c.dtype} codes" if f in strings else f"{f}:{c.dtype}") if src.fields
                         else f"{c.dtype}[stride {c.strides[0] // c.itemsize}]"
                         for f, c in zip(src.fields or [""] * len(cols), cols))
        out.append(f"  source: {src.kind}({desc}), n={n}" + origin_note(src))
        if src.shapes:                 # shaped elements: the strategy (shaped.py)
            out.append(f"  {shaped_text(src, name, p)}")
    for i, op in enumerate(q.nodes()):
        out.append(f"  {i + 1}. {op.kind:<6} {infos[i][0].text}  -> {lowered.steps[i][2]}")
    fn_texts = [infos[len(q._ops) + j][0].text for j in range(len(term.fns))]
    out.append(f"  terminal: {term.name}" + (f" ({'; '.join(fn_texts)})" if fn_texts else ""))
    stages = lowered.stages
    out.append(f"fused plan: {len(stages)} stage{'s' if len(stages) > 1 else ''} "
               f"(every select/where and the terminal fused into one pass each)")
    for i, (op, stage_pass) in enumerate(stages, 1):
        out.append(f"  stage {i}: {op} ({_op_text(op, name)})")
    prog = p.program
    if prog.params:
        out.append("  parameters: " + _params_text(prog.params, lowered.bindings))
    out += [f"  {line}" for line in pretty.program_lines(prog)]
    if isinstance(p.terminal, Reduce):
        out += [f"  aggregate {pretty.agg_text(a)}" for a in p.terminal.aggs]
        if windows.early_exit(lowered) is not None:
            out.append(f"  early exit: runs over windows of {windows.FIRST_WINDOW} elements, "
                       f"x{windows.GROWTH} each, until one decides (querycompute/run/windows.py)")
    else:
        outs = ", ".join(f"{pretty.fmt(e)}:{e.dtype}" for e in prog.outputs)
        out.append(f"  store in order{' (compacted)' if prog.has_filter else ''}: {outs}")
    out.append(f"kernels ({name}):")
    try:
        for k in registry.get(name).launch_shape(p, n):
            via = f" ({k['compiler']})" if "compiler" in k else ""
            out.append(f"  {k['name']}: grid={k['grid']} block={k['block']}{via}")
    except ImportError as exc:
        out.append(f"  (launch shapes unavailable: {exc})")
    kernel_lines, read, columns = _kernel_traffic(p, name, n)
    out += _traffic(lowered, term, read, columns, name)
    if on_gpu(name):                   # the host backends don't run these kernels
        out += kernel_lines
    return "\n".join(out)


def _kernel_traffic(p, backend: str, n: int) -> tuple[list[str], int, int]:
    """(a line per launch: the bytes it really reads and writes at n, the input bytes per
    element all kernels read together, the bytes per element of the columns read) from the
    kernels' IR (_codegen/traffic.py): only the
    columns a kernel loads count, and a compaction's second read of its inputs does too.
    The host backends (cpu, numpy) read the same columns: their per-element figures are the
    CUDA kernels', and explain() prints no kernel lines for them."""
    from querycompute._codegen import gpu
    from querycompute._codegen.traffic import launch_traffic
    be = registry.get(backend)
    on_device = be.caps.device == "gpu"
    if not on_device and any(s.table for s in p.program.params):
        per = sum(np.dtype(s.dtype).itemsize for s in p.program.inputs)   # (no GPU kernel reads
        return [], per, per                     # a string function's table: nothing to count)
    dialect = be.dialect if on_device else "cuda"
    with codegen_errors(dialect):
        ks = gpu.render(p, dialect)
    params = [0] * len(p.program.params)
    if ks.window is not None:                  # a compaction window: the largest, [0, n)
        params[ks.window[1]] = n
    dtypes = [s.dtype for s in p.program.inputs]
    item = {f"in_{s.name}": np.dtype(s.dtype).itemsize for s in p.program.inputs}
    item.update({b: m * item[f"in_{p.program.inputs[k].name}"] for b, k, m in ks.elements})   # whole elements
    rows = launch_traffic(ks, n, dtypes, params)
    lines = [f"kernel traffic at n={n} ({dialect} kernels; outputs at most):"]
    lines += [f"  {r.name}: reads {r.read} B, writes {r.written} B" for r in rows]
    streams = [b for spec in ks.kernels if spec.variant != "strided" for b in spec.reads if b in item]
    return lines, sum(item[b] for b in streams), sum(item[b] for b in set(streams))


# a reduction's partials on the host backends, by where their kernels run (BackendCaps.device)
_PARTIALS = {"host": " (plus one partial per chunk)", "reference": ""}


def _traffic(lowered, term: Terminal, read: int, columns: int, backend: str) -> list[str]:
    """Bytes per element of the fused pass (`read`: what its kernels load, every pass over the
    input counted) against one kernel per operator (the first reading `columns`)."""
    prog = lowered.pass_.program
    reduce = isinstance(lowered.pass_.terminal, Reduce)
    written = 0 if reduce else _element_bytes(prog.output_dtypes)
    # Unfused: every operator is its own kernel that reads its input element and writes its
    # result (a filter writes a flag byte, then compaction reads and writes the element);
    # the terminal reads the last result.
    unfused, current = 0, columns
    for kind, width, _ in lowered.steps:
        unfused += current + (width if kind == "select" else 1 + 2 * current)
        current = width
    for _, spec in term.specs:           # a terminal's own function is one more kernel
        if spec.fn is not None:
            out = 1 if spec.kind in ("count", "any", "all", "first") else current
            unfused += current + out
            current = out
    unfused += current + written
    return [f"memory traffic per element: fused reads {read} B, writes {written} B"
            + (_PARTIALS.get(registry.get(backend).caps.device, " (plus one partial per block)")
               if reduce else " (at most: only survivors are written)"),
            f"  one kernel per operator instead would move about {unfused} B per element "
            f"({unfused / max(read + written, 1):.1f}x the fused pass)"]


def shaped_text(source, backend: str = "", p=None) -> str:
    """explain()'s line for shaped inputs: the strategy and the bytes each element reads. On
    a GPU dialect (`p`: the pass), how its kernels read each array (_codegen/elements.py):
    whole elements with aligned wide loads when the array's elements are C-contiguous, else
    gathered, one strided load per component."""
    parts = []
    for a, s in zip(source._items, source.shapes):
        if s:
            nbytes = math.prod(s) * a.dtype.itemsize
            layout = "contiguous" if a[0:1].flags.c_contiguous else "strided/F-ordered"
            parts.append(f"{a.dtype}{list(s)} ({nbytes} B/element, {math.prod(s)} scalar "
                         f"columns, {layout})")
    text = "shaped elements: " + "; ".join(parts)
    device = registry.get(backend).caps.device if backend else ""
    if p is not None and device == "host":
        if whole_arrays(p):            # a map / compaction (backends/cpu_elements.py)
            out = (", the result written in place as one (m, k) array"
                   if getattr(p.terminal, "element", 0) else "")
            return text + (" -- cpu strategy: scalarized, one element per loop iteration in "
                           "registers, each array read whole as one (n, m) array (a view; a "
                           "copy where the components are not evenly spaced: F-ordered or "
                           f"transposed matrices){out}")
    if p is None or device != "gpu":
        return text + (" -- strategy: scalarized, one element per thread in registers, each "
                       "component read as a strided column")
    dialect = registry.get(backend).dialect
    ks = gpu.render(p, dialect)
    wide = gpu.printer(dialect).VECTOR_LOADS
    cols = shaped_columns(source)
    arrays = elements.arrays(p.program)
    comps = {a.first + j for a in arrays for j in range(a.m)}
    # one contiguity decision for every input (gpu_launch.LaunchLoop): whole elements only
    # when every array is element-contiguous and every other column unit-strided
    odd = [a.name for a in arrays if whole(cols[a.first:a.first + a.m]) is None]
    odd += [s.name for k, s in enumerate(p.program.inputs) if k not in comps and k < len(cols)
            and not (cols[k].flags.c_contiguous or len(cols[k]) <= 1)]
    if odd:
        how = ("gathered: one strided scalar load per component of every element (the strided "
               f"variant: {', '.join(odd)} not C-contiguous)")
    else:
        how = "; ".join(f"{a.name}: {a.nbytes} B/element, whole elements, "
                        f"{elements.strategy(a, ks.elems_per_thread, wide)}" for a in arrays) or "scalarized columns"
    return text + f" -- {backend} strategy: {how}"
