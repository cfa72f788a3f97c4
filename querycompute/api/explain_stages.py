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
from querycompute._codegen.ir.program import Reduce

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


def on_gpu(backend: str) -> bool:
    """Whether `backend` runs a GPU dialect's kernels (BackendCaps.device): explain() shows
    those kernels and their traffic; a host runtime describes its column operations itself."""
    return registry.get(backend).caps.device == "gpu"


def _column_lines(stage, runtime, backend: str, element_dtypes) -> list[str]:
    if on_gpu(backend):
        return [f"    {line}" for line in stage.gpu_traffic(backend, element_dtypes)]
    lines = stage.host_lines(runtime, element_dtypes)
    return [f"    {line}" for line in lines]


def _element_dtypes(staged) -> list:
    """Per stage: the dtypes of the element columns going into it (for gathers)."""
    out, current = [], None
    for stage in staged.stages:
        out.append(current)
        current = stage.dtypes_after(current)
    return out


def q_dtypes(q) -> tuple:
    cols = q._source.columns()
    return q._source.dtypes(cols)


def origin_note(src) -> str:
    """', <where the columns came from>' when the source says (a group_by result's groups)."""
    origin = getattr(src, "origin", "")        # (a DaskSource has none)
    return f"; {origin}" if origin else ""


def explain(q, staged: S.StagedLowered, term, infos, backend: str, n: int, runtime) -> str:
    src = q._source
    out = ["operation graph:", f"  source: {src.kind}, n={n}" + origin_note(src)]
    for i, op in enumerate(q.nodes()):
        text = infos[i][0].text
        if infos[i][0].filename == "<count>":
            text = f"n = {infos[i][1]['n']} (read on every run: a new n never recompiles)"
        out.append(f"  {i + 1}. {op.kind:<6} {text}")
    out.append(f"  terminal: {term.name}")
    if staged.logical:                 # the optimized logical plan (plan/logical.py)
        out.append("logical plan (optimized):")
        out += list(staged.logical)
        out.append("  optimizer passes: " + ("; ".join(staged.optimizer) or "none applied"))
    fused = S.fused_scans(staged.stages, runtime)      # scan i runs with pass i + 1
    n_stages = len(staged.stages) - len(fused)
    from ..plan.join_plan import fusable as join_fusable
    indexed = runtime.caps.indexed_passes           # a join's next pass reads through the pairs
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
            from querycompute._codegen.ops.scan import fused_gpu as scan_fused
            fp = fused[i - 1]
            rows = scan_fused.bytes_per_element(fp, backend)
            out.append(f"    fused with the next pass: {scan_fused.describe(fp, backend)}")
            out += [f"      {name}: {b} B per element" for name, b in rows]
            out.append(f"      total: {sum(b for _, b in rows)} B per element (the unfused plan: the scan's "
                       f"{sum(b for _, b in stage.gpu_rows(backend))} B, then the pass's)")
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
            gpu = on_gpu(backend)
            why = S.gpu_scan_fused(staged.stages, i - 1)[1] if gpu else ""
            if gpu and not why and S.plain_pass_after(staged.stages, i - 1, S.ScanStage) is not None \
                    and not runtime.fuses_scan(stage.spec):   # the runtime's kernels don't hold its
                why = f"a 64-bit scan runs on the numpy reference on {backend}"   # values (WGSL)
            if why:
                out.append(f"    (on {backend} the scan and the pass after it are two stages: the "
                           f"scanned column is written, then read by the next pass; not fused: {why})")
    if runtime.caps.device_columns:
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
    gpu = on_gpu(backend)
    comment = "//" if gpu else "#"                  # the C-family dialects; Python / numba
    fused = S.fused_scans(staged.stages, runtime) if gpu else {}
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
        if gpu:                            # (a host runtime's column operations: no kernel text)
            with codegen_errors(backend):  # a dtype the dialect lacks: UnsupportedTypeError
                body = "\n".join(f"{comment} {what}\n{ks.source}" for what, ks in
                                 stage.gpu_kernels(backend, element_dtypes[i - 1] or ()))
        parts.append(f"{header}\n{body or comment + ' (no generated kernel: a host-side column operation)'}")
    return "\n\n".join(parts)
