"""The generated GPU sources for the DESIGN.md section 8 workloads (W1-W6) read like code a
GPU engineer writes: no parenthesis pile-ups, no casts C's conversions already make, work
after a filter done only for survivors, nothing defined and unused, one copy of each
comment. Each test names the property; a regression in the printer or lowerings fails it."""
from __future__ import annotations

import re

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P
from querycompute._codegen.gpu import printer, render

DIALECTS = ("cuda", "opencl", "metal")
X = np.zeros(8, np.float32)
TABLE = {"price": np.zeros(8, np.float32), "qty": np.zeros(8, np.int32), "cat": np.zeros(8, np.int32)}


def workloads() -> dict:
    q = qc.query(X)
    return {
        "W1": q.select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100).lowered("sum"),
        "W2": q.where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1).lowered("to_array"),
        "W3": q.lowered(qc.count(lambda v: 500 < v < 1500)),
        "W4": qc.query(X, X).select(lambda a, b: a * b + 1).lowered("sum"),
        "W5": q.where(lambda v: v > 10).select(lambda v: np.sqrt(v) + 1).lowered(qc.agg(mean=qc.mean, peak=qc.max)),
        "W6": qc.query(TABLE).where(lambda r: r.cat == 3 and r.qty > 2).lowered(qc.sum(lambda r: r.price * r.qty)),
    }


PASSES = {w: lowered[0].pass_ for w, lowered in workloads().items()}
# W6 sums price * qty in float64 (NumPy promotes float32 * int32): Metal has no double
CASES = [(w, d) for w in PASSES for d in DIALECTS if not (w == "W6" and d == "metal")]


def max_body_lines(shape: str, accumulator_slots: int) -> int:
    """Statement lines a kernel of `shape` may take (signature excluded): a reduction grows
    with its accumulators (declare, fold, tree, write per slot), compaction is fixed; the
    reduction's grid-stride loop holds a per-thread loop over a run of consecutive elements,
    and its SIMD-group tree a loop for groups narrower than 16 lanes (Metal, issue 11 item 9)."""
    return 28 + 13 * accumulator_slots + WIDE_RUN if shape == "reduce" else 38 + 2 * WIDE_RUN


# A contiguous reduction's stage 1 folds a whole run of 4 elements from one 16-byte load per
# input (loads, unpacking, the element program) and the run that crosses n element by element
# (the element program again, bounds-checked): issue 18 item 1 (_codegen/lower/vector.py).
# A compaction's scatter does that twice: its count of the run, then its writes.
WIDE_RUN = 22
# A one-launch reduction (CUDA, OpenCL) also holds the finalize kernel's statements, behind
# the ticket that picks the last block to finish (fence, atomic add, flag, barrier, reset).
LAST_BLOCK = 14


@pytest.fixture(scope="module")
def sources() -> dict:
    return {(w, d): render(PASSES[w], d) for w, d in CASES}


def kernel_bodies(src: str) -> list[str]:
    """Each kernel from its signature to its closing brace at column 0."""
    return re.findall(r"^(?:extern|__kernel|kernel void)[\s\S]*?^}$", src, flags=re.M)


@pytest.mark.parametrize("w,d", CASES)
def test_no_parenthesis_pileups_or_redundant_index_casts(sources, w, d):
    src = sources[w, d].source
    assert "(((" not in src
    body = "\n".join(kernel_bodies(src))
    # thread ids are compared and indexed through `const int lid = ...` locals, not casts (a
    # wide load's unpacking `{(int)w.x, ...}` is not one: C++ brace initialisation refuses the
    # narrowing unsigned -> int conversion without it)
    assert "(int)" not in "\n".join(ln for ln in body.splitlines() if " = {" not in ln)
    # 64-bit index math casts its first factor only (CUDA's single-pass compaction indexes by
    # its int64 tile ticket, a reduction's stage 1 by its int64 logical block `lblock`
    # (_codegen/lower/logical_blocks.py) instead of the block id: nothing to cast there)
    assert "ticket" in src or "lblock * " in body or re.search(r"\(long(?: long)?\)\w+(?:\.x|\(0\))? \* \w+(?:\.x|\(0\))? \+ \w+(?:\.x|\(0\))?", body)
    assert not re.search(r"\* \(long(?: long)?\)", body) and not re.search(r"\+ \(long(?: long)?\)", body)


@pytest.mark.parametrize("w,d", CASES)
def test_every_helper_and_local_is_used(sources, w, d):
    src = sources[w, d].source
    for name in re.findall(r"^(?:static[^\n(]*?) (qc_\w+)\(", src, flags=re.M):
        assert len(re.findall(rf"\b{name}\(", src)) >= 2, f"helper {name} defined but never called"
    for kernel in kernel_bodies(src):
        declared = re.findall(r"^\s+(?:const )?[a-z ]+ (\w+) = ", kernel, flags=re.M)
        thread_params = re.findall(r"uint (qc_\w+) \[\[", kernel)      # Metal's [[thread_...]] inputs
        for name in declared + thread_params:
            uses = re.findall(rf"\b{name}\b", kernel)
            assert len(uses) >= 2, f"{name} declared but never read in\n{kernel}"


@pytest.mark.parametrize("w,d", CASES)
def test_each_comment_is_said_once(sources, w, d):
    comments = [ln.strip() for ln in sources[w, d].source.splitlines() if ln.strip().startswith("//")]
    assert len(comments) == len(set(comments)), [c for c in comments if comments.count(c) > 1]


@pytest.mark.parametrize("w,d", CASES)
def test_line_count_per_kernel_shape(sources, w, d):
    ks = sources[w, d]
    for kernel in kernel_bodies(ks.source):
        lines = kernel.splitlines()
        opened = next(k for k, ln in enumerate(lines) if ln.endswith(") {"))
        # CUDA's single-pass compaction is count + block scan + look-back + staged writes
        # in one kernel, each over the thread's runs (ops/compact/gpu.py): its own budget
        limit = 140 if "_compact_lookback" in lines[0] else max_body_lines(ks.shape, len(ks.result_slots))
        if "blocks_done" in kernel:      # a one-launch reduction: its last block finalizes (ops/reduce)
            limit += max_body_lines(ks.shape, len(ks.result_slots)) - WIDE_RUN + LAST_BLOCK
        assert len(lines) - opened - 2 <= limit, kernel


@pytest.mark.parametrize("d", DIALECTS)
def test_work_after_a_filter_runs_only_for_survivors(sources, d):
    """W1: v + 100 is computed after the filter on v * 2 drops the element, and the filter
    is tested in program order, right after what it reads."""
    src = sources["W1", d].source
    kernel = kernel_bodies(src)[0]
    lines = [ln.strip() for ln in kernel.splitlines()]
    drop = lines.index("if (!(v_v0 > 1000.0f)) continue;")
    assert lines[drop - 1] == "float v_v0 = x_x * 2.0f;"
    assert lines[drop + 1] == "float v_v1 = v_v0 + 100.0f;"
    assert lines[drop + 2] == "acc0 += v_v1;"


@pytest.mark.parametrize("d", DIALECTS)
def test_inputs_are_loaded_when_first_needed(sources, d):
    """W6 (CUDA, OpenCL): price is read only for rows that pass the filter on cat and qty;
    W2's count kernel never computes the select the filter doesn't need."""
    if d != "metal":
        # the element-by-element run (the wide run loads each input once, 16 bytes at a time)
        kernel = kernel_bodies(sources["W6", d].source)[0]
        tail = kernel[kernel.index("The run that crosses n"):]
        assert tail.index("continue;") < tail.index("= in_price[i];")
    kernels = kernel_bodies(sources["W2", d].source)
    count = next((k for k in kernels if "_compact_count(" in k), None)
    if count is not None:           # OpenCL / Metal: a count kernel, then the scan, then scatter
        assert "v_v0" not in count and "survivors++;" in count
    else:                           # CUDA's single pass counts its tile before it computes values
        one = next(k for k in kernels if "_compact_lookback(" in k)
        assert one.index("survivors++;") < one.index("v_v0 =")


def test_filter_before_a_barrier_never_returns_early():
    """A filtered compaction: every thread reaches the scan's barriers (drops are `continue`
    inside the per-thread loop, never `return`)."""
    x = E.Load(0, "float32")
    prog = P.ElementProgram((P.InputSpec("x", "float32"),), (), (P.Filter(E.Compare("gt", x, E.Const(0.0, "float32"))),), (x,))
    for d in DIALECTS:
        src = render(P.Pass(prog, P.ToArray(), "keep_pos"), d).source
        assert "return" not in "\n".join(kernel_bodies(src))


@pytest.mark.parametrize("expr, text", [
    # float subtraction is not associative: the right operand keeps its parentheses
    (E.Binary("sub", E.Var("a", "float32"), E.Binary("sub", E.Var("b", "float32"), E.Var("c", "float32"), "float32"), "float32"),
     "a - (b - c)"),
    (E.Binary("add", E.Binary("mul", E.Var("a", "float32"), E.Var("b", "float32"), "float32"), E.Var("c", "float32"), "float32"),
     "a * b + c"),
    # never the token `--`
    (E.Unary("neg", E.Const(-2.5, "float32"), "float32"), "-(-2.5f)"),
    # bit operators and mixed &&/|| keep the parentheses a reader needs
    (E.Compare("eq", E.Binary("bitand", E.Var("a", "uint32"), E.Var("b", "uint32"), "uint32"), E.Var("c", "uint32")),
     "(a & b) == c"),
    (E.Binary("and", E.Var("p", "bool"), E.Binary("or", E.Var("q", "bool"), E.Var("r", "bool"), "bool"), "bool"),
     "p && (q || r)"),
    (E.Where(E.Compare("lt", E.Var("a", "int32"), E.Var("b", "int32")), E.Var("a", "int32"), E.Var("b", "int32"), "int32"),
     "a < b ? a : b"),
])
def test_expressions_are_parenthesised_where_c_or_a_reader_needs_it(expr, text):
    assert printer("cuda").ex(expr) == text
