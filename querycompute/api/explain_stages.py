"""`.explain()` and `.source()` of a staged plan (stages.py): every stage, its kernels, its
launch shapes and the bytes it moves per element; the source of every kernel of every stage.

Bytes per element are the stage's own traffic for one element of its input: a fused pass
reads its input columns and writes its output columns (survivors only, at most); a column
operation states its kernels' traffic (the backend's StageRuntime describes its kernels
where it has them; otherwise the figures below, for the algorithm DESIGN.md section 5b names).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from querycompute._codegen import pretty
from querycompute._codegen.program import Reduce

from ..plan import stage_kinds as S
from ..backends import registry
from ..errors import codegen_errors


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


GPU_DIALECTS = ("cuda", "opencl", "metal", "webgpu")


def _bits_dtypes(dtypes) -> tuple:
    from querycompute._codegen import order_keys
    return tuple(order_keys.bits_dtype(d) for d in dtypes)


def _is_group(stage) -> bool:
    from ..plan.group_plan import GroupStage
    return isinstance(stage, GroupStage)


def _gpu_kernels(stage, dialect: str, element_dtypes) -> list[tuple[str, object]]:
    """(what, KernelSet) of a column operation's GPU kernels in `dialect`."""
    from querycompute._codegen.ops import gather as gather_op
    from querycompute._codegen.ops import scan as scan_op
    from querycompute._codegen.ops import sort as sort_op
    from querycompute._codegen.ops import topk as topk_op
    if isinstance(stage, S.ScanStage):
        return [("scan", scan_op.render(stage.spec, dialect))]
    if isinstance(stage, S.ReverseStage):
        return [("reverse", gather_op.render_reverse(_bits_dtypes(element_dtypes), dialect))]
    if _is_group(stage):
        from querycompute._codegen.ops import group as group_op
        from querycompute._codegen.ops import group_table as table_op
        return [("group_by, <= 4096 groups (tried first)", table_op.render_group_table(stage.spec, dialect)),
                ("group_by", group_op.render_group(stage.spec, dialect))]
    if isinstance(stage, S.DistinctStage):
        return [("first-occurrence flags", sort_op.render_sort(stage.spec, dialect, distinct=True))]
    if isinstance(stage, S.SortStage):
        sets = [("top-k", topk_op.render_topk(stage.spec, dialect))] if stage.window is not None \
            else [("sort", sort_op.render_sort(stage.spec, dialect))]
        return sets + [("gather", gather_op.render_gather(_bits_dtypes(element_dtypes), dialect))]
    return []


def _gpu_traffic(stage, dialect: str, element_dtypes) -> list[str]:
    """Per kernel launch that touches every element: bytes read + written per element."""
    from querycompute._codegen.ops import gather as gather_op
    from querycompute._codegen.ops import scan as scan_op
    from querycompute._codegen.ops import sort as sort_op
    from querycompute._codegen.ops import topk as topk_op
    if isinstance(stage, S.ScanStage):
        rows = scan_op.bytes_per_element(stage.spec, dialect)
        head = scan_op.describe(stage.spec, dialect)
    elif isinstance(stage, S.ReverseStage):
        rows = [("qc_reverse", gather_op.reverse_bytes_per_element(_bits_dtypes(element_dtypes)))]
        head = "reverse on the device: out[i] = col[n - 1 - i], coalesced reads and writes"
    elif isinstance(stage, S.DistinctStage):
        rows = sort_op.bytes_per_element(stage.spec, distinct=True, dialect=dialect)
        head = "stable LSD radix sort of the keys (8-bit digits), then flags where a key changes"
    elif isinstance(stage, S.SortStage) and stage.window is not None:
        rows = topk_op.bytes_per_element(stage.spec)
        head = "top-k: radix select of the k-th key, order-preserving compaction, one-block sort of k"
    elif _is_group(stage):
        from querycompute._codegen.ops import group as group_op
        rows = group_op.bytes_per_element(stage.spec, dialect=dialect)
        head = group_op.describe(stage.spec)
    elif isinstance(stage, S.SortStage):
        rows = sort_op.bytes_per_element(stage.spec, dialect=dialect)
        head = f"stable LSD radix sort, {len(sort_op.passes(stage.spec))} passes of 8-bit digits (a stable " \
               f"scatter each; a key's first byte counted by a read, the next passes' counts added by " \
               f"the scatter before them), int32 index payload"
    elif type(stage).__name__ == "JoinStage":
        from querycompute.backends.gpu.gpu_join import explain_lines      # its kernels, bytes per row
        return explain_lines([element_dtypes[k] for k in stage.keys], stage.key_dtypes, dialect)
    else:
        return []
    out = [head] + [f"  {name}: {b} B per element" for name, b in rows]
    total = sum(b for _, b in rows)
    if isinstance(stage, S.SortStage):
        g = gather_op.gather_bytes_per_element(_bits_dtypes(element_dtypes))
        out.append(f"  gather of the element columns: {g} B per {'output row' if stage.window else 'element'}")
    out.append(f"  total: {total} B per element")
    if _is_group(stage):
        from querycompute._codegen.ops import group_table as table_op
        out += table_op.explain_lines(stage.spec)
    return out


def _scan_rows(stage, dialect: str) -> list:
    from querycompute._codegen.ops import scan as scan_op
    return scan_op.bytes_per_element(stage.spec, dialect)


def _column_lines(stage, runtime, backend: str, element_dtypes) -> list[str]:
    if backend in GPU_DIALECTS:
        return [f"    {line}" for line in _gpu_traffic(stage, backend, element_dtypes)]
    describe = getattr(runtime, "describe", None)
    lines = describe(stage, element_dtypes) if describe is not None else None
    if lines:
        return [f"    {line}" for line in lines]
    if isinstance(stage, (S.SortStage, S.DistinctStage)):
        key = _bytes(stage.spec.key_dtypes)
        what = "top-k (per-chunk candidates, then a sort of those)" if getattr(stage, "window", None) \
            else f"LSD radix sort, up to {key} passes of 8-bit digits (a pass whose digit is the same for every key is skipped)"
        return [f"    {what}; {runtime.name} column operation"]
    if isinstance(stage, S.ScanStage):
        b = np.dtype(stage.spec.dtype).itemsize
        return [f"    two passes over fixed chunks (chunk totals, then running fold with carry-in): "
                f"reads {2 * b} B, writes {b} B per element"]
    return []


def _element_dtypes(staged) -> list:
    """Per stage: the dtypes of the element columns going into it (for gathers)."""
    out, current = [], None
    for stage in staged.stages:
        out.append(current)
        lowered = getattr(stage, "lowered", None)
        if isinstance(stage, S.PassStage):
            current = lowered.pass_.program.output_dtypes
        if isinstance(stage, (S.SortStage, S.DistinctStage)) and current is not None:
            current = current[:stage.element]
        if isinstance(stage, S.ScanStage):
            current = (stage.spec.dtype,)
    return out


def q_dtypes(q) -> tuple:
    return tuple(str(c.dtype) for c in q._source.columns())


def explain(q, staged: S.StagedLowered, term, infos, backend: str, n: int, runtime) -> str:
    src = q._source
    out = ["operation graph:", f"  source: {src.kind}, n={n}"]
    for i, op in enumerate(q.nodes()):
        text = infos[i][0].text
        if infos[i][0].filename == "<count>":
            text = f"n = {infos[i][1]['n']} (read on every run: a new n never recompiles)"
        out.append(f"  {i + 1}. {op.kind:<6} {text}")
    out.append(f"  terminal: {term.name}")
    fused = S.fused_scans(staged.stages, runtime)      # scan i runs with pass i + 1
    n_stages = len(staged.stages) - len(fused)
    from ..plan.join_plan import fusable as join_fusable
    indexed = getattr(runtime, "indexed_passes", False)
    n_stages -= sum(join_fusable(staged.stages, i) for i in range(len(staged.stages))) if indexed else 0
    out.append(f"staged plan: {n_stages} stage{'s' * (n_stages != 1)} on {backend} "
               f"(selects/wheres fused into the pass at each side of a breaker)")
    element_dtypes = _element_dtypes(staged)
    k = 0
    for i, (stage, text) in enumerate(zip(staged.stages, staged.texts), 1):
        lowered = getattr(stage, "lowered", None)
        if i - 2 in fused:
            out.append(f"    + {text}, in the same pass: its element reads the scan's running value "
                       f"(the scanned column is never stored)")
            fp = fused[i - 2]
            out += _pass_lines(lowered if fp is None else replace(lowered, pass_=fp), backend, n)
            continue
        if i >= 2 and indexed and join_fusable(staged.stages, i - 2):
            out.append(f"    + {text}, in the same pass: its element reads both sides' columns through "
                       f"the pairs (left[li[k]], right[ri[k]]; nothing is gathered)")
            out += _pass_lines(lowered, backend, n)
            continue
        k += 1
        if indexed and join_fusable(staged.stages, i - 1):
            text = text.replace("; both sides gathered", "; handed to the pass below as index pairs")
        out.append(f"  stage {k}: {text}")
        if i - 1 in fused and fused[i - 1] is not None:       # a GPU dialect's fused kernels
            from querycompute._codegen.ops import scan_fused
            fp = fused[i - 1]
            rows = scan_fused.bytes_per_element(fp, backend)
            out.append(f"    fused with the next pass: {scan_fused.describe(fp, backend)}")
            out += [f"      {name}: {b} B per element" for name, b in rows]
            out.append(f"      total: {sum(b for _, b in rows)} B per element (the unfused plan: the scan's "
                       f"{sum(b for _, b in _scan_rows(stage, backend))} B, then the pass's)")
            continue
        if i - 1 in fused:
            b = np.dtype(stage.spec.dtype).itemsize
            out.append(f"    fused with the next pass: the scan's chunk totals and carries (reads {b} B "
                       f"per element), then the pass below runs the running fold in its own loop")
            continue
        if lowered is not None:
            out += _pass_lines(lowered, backend, n)
        else:
            out += _column_lines(stage, runtime, backend, element_dtypes[i - 1] or q_dtypes(q))
            why = S.gpu_scan_fused(staged.stages, i - 1)[1] if backend in GPU_DIALECTS else ""
            if backend == "webgpu" and S.plain_pass_after(staged.stages, i - 1, S.ScanStage) is not None \
                    and not why:
                why = "a 64-bit scan runs on the numpy reference on webgpu"
            if why:
                out.append(f"    (on {backend} the scan and the pass after it are two stages: the "
                           f"scanned column is written, then read by the next pass; not fused: {why})")
    if getattr(runtime, "device_columns", False):
        out.append("between stages the columns stay on the device (device columns); only the "
                   "terminal's result is read back (a join's pairs and gathers stay there too; webgpu's join runs on the host)")
    else:
        out.append("between stages the columns are host arrays, handed from stage to stage")
    return "\n".join(out)


def source(staged: S.StagedLowered, backend: str, runtime) -> str:
    """Every kernel of every stage in `backend`'s dialect: the fused passes' and the column
    operations' (those the StageRuntime generates)."""
    parts = []
    be = registry.get(backend)
    element_dtypes = _element_dtypes(staged)
    comment = "#" if backend in ("numpy", "cpu") else "//"
    fused = S.fused_scans(staged.stages, runtime) if backend in GPU_DIALECTS else {}
    for i, (stage, text) in enumerate(zip(staged.stages, staged.texts), 1):
        lowered = getattr(stage, "lowered", None)
        header = f"{comment} ---- stage {i}: {text}"
        if i - 1 in fused:
            parts.append(f"{header}\n{comment} (fused with stage {i + 1}: the scan runs in its kernels below)")
            continue
        if lowered is not None:
            p = fused[i - 2] if i - 2 in fused else lowered.pass_
            if i - 2 in fused:
                header += (f"\n{comment} (in the last pass of the scan of stage {i - 1}: the scanned column "
                           f"is never stored)")
            with codegen_errors(backend):
                parts.append(f"{header}\n{be.source(p)}")
            continue
        body = ""
        if backend in GPU_DIALECTS:
            with codegen_errors(backend):  # a dtype the dialect lacks: UnsupportedTypeError
                body = "\n".join(f"{comment} {what}\n{ks.source}" for what, ks in
                                 _gpu_kernels(stage, backend, element_dtypes[i - 1] or ()))
        elif getattr(runtime, "source", None) is not None and getattr(stage, "spec", None) is not None:
            body = runtime.source(stage.spec)
        parts.append(f"{header}\n{body or comment + ' (no generated kernel: a host-side column operation)'}")
    return "\n\n".join(parts)
