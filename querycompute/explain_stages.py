"""`.explain()` and `.source()` of a staged plan (stages.py): every stage, its kernels, its
launch shapes and the bytes it moves per element; the source of every kernel of every stage.

Bytes per element are the stage's own traffic for one element of its input: a fused pass
reads its input columns and writes its output columns (survivors only, at most); a column
operation states its kernels' traffic (the backend's StageRuntime describes its kernels
where it has them; otherwise the figures below, for the algorithm DESIGN.md section 5b names).
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import pretty
from querycompute._codegen.program import Reduce

from . import stages as S
from .backends import registry
from .errors import codegen_errors


def _bytes(dtypes) -> int:
    return sum(np.dtype(d).itemsize for d in dtypes)


def _pass_lines(lowered, backend: str, n: int) -> list[str]:
    p = lowered.pass_
    prog = p.program
    out = [f"    {line}" for line in pretty.program_lines(prog)]
    if isinstance(p.terminal, Reduce):
        out += [f"    aggregate {pretty.agg_text(a)}" for a in p.terminal.aggs]
    read = _bytes(i.dtype for i in prog.inputs)
    written = 0 if isinstance(p.terminal, Reduce) else _bytes(prog.output_dtypes)
    try:
        for k in registry.get(backend).launch_shape(p, n):
            out.append(f"    kernel {k['name']}: grid={k['grid']} block={k['block']}")
    except ImportError as exc:
        out.append(f"    (launch shapes unavailable: {exc})")
    out.append(f"    bytes per element: reads {read} B, writes {written} B"
               + (" (survivors only)" if prog.has_filter and not written == 0 else ""))
    return out


def sort_traffic(spec) -> tuple[int, int]:
    """(digit passes, bytes per element per pass) of an LSD radix sort with an int64 index
    permutation: each 8-bit pass reads and writes the key bits and the index (histogram
    reads of the keys counted too)."""
    key = _bytes(spec.key_dtypes)
    passes = key                                   # one 8-bit digit per key byte
    return passes, 3 * key + 2 * 8


def _column_lines(stage, runtime) -> list[str]:
    describe = getattr(runtime, "describe", None)
    if describe is not None:
        lines = describe(stage)
        if lines:
            return [f"    {line}" for line in lines]
    if isinstance(stage, (S.SortStage, S.DistinctStage)):
        passes, per = sort_traffic(stage.spec)
        what = "top-k: candidates by radix select, then a sort of at most k" if getattr(stage, "window", None) \
            else f"LSD radix sort, {passes} passes of 8-bit digits"
        return [f"    {what}; about {per} B per element per pass "
                f"({_bytes(stage.spec.key_dtypes)} B of key bits + an 8 B index, read and written)"]
    if isinstance(stage, S.ScanStage):
        b = np.dtype(stage.spec.dtype).itemsize
        return [f"    reduce-then-scan: reads {2 * b} B, writes {b} B per element"]
    return []


def explain(q, staged: S.StagedLowered, term, infos, backend: str, n: int, runtime) -> str:
    src = q._source
    out = ["operation graph:", f"  source: {src.kind}, n={n}"]
    for i, op in enumerate(q.nodes()):
        text = infos[i][0].text
        if infos[i][0].filename == "<count>":
            text = f"n = {infos[i][1]['n']} (read on every run: a new n never recompiles)"
        out.append(f"  {i + 1}. {op.kind:<6} {text}")
    out.append(f"  terminal: {term.name}")
    out.append(f"staged plan: {len(staged.stages)} stages on {backend} "
               f"(selects/wheres fused into the pass at each side of a breaker)")
    for i, (stage, text) in enumerate(zip(staged.stages, staged.texts), 1):
        out.append(f"  stage {i}: {text}")
        lowered = getattr(stage, "lowered", None)
        if lowered is not None:
            out += _pass_lines(lowered, backend, n)
        else:
            out += _column_lines(stage, runtime)
    out.append("between stages the columns stay where the backend keeps them "
               "(host memory for numpy and cpu)")
    return "\n".join(out)


def source(staged: S.StagedLowered, backend: str, runtime) -> str:
    """Every kernel of every stage in `backend`'s dialect: the fused passes' and the column
    operations' (those the StageRuntime generates)."""
    parts = []
    be = registry.get(backend)
    comment = "#" if backend in ("numpy", "cpu") else "//"
    for i, (stage, text) in enumerate(zip(staged.stages, staged.texts), 1):
        lowered = getattr(stage, "lowered", None)
        header = f"{comment} ---- stage {i}: {text}"
        if lowered is not None:
            with codegen_errors(backend):
                parts.append(f"{header}\n{be.source(lowered.pass_)}")
            continue
        spec = getattr(stage, "spec", None)
        text_of = getattr(runtime, "source", None)
        body = text_of(spec) if spec is not None and text_of is not None else ""
        parts.append(f"{header}\n{body or comment + ' (no generated kernel: a host-side column operation)'}")
    return "\n\n".join(parts)
