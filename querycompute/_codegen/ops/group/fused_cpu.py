"""The numba dialect of a FUSED low-cardinality group_by: one pass that evaluates a fused
pass's element (its selects, wheres, the key and every aggregate's input) and folds the
aggregates straight into per-chunk private tables, so neither the key nor the inputs are
ever stored (TPC-H Q1: 7 float64 inputs and 2 key bytes per row never touch memory).

It computes exactly what the two-step path computes (the pass's compaction into columns,
then ops/group/cpu.py's `low` entry point over them), bit for bit: THE ORDER is the
same, defined on the survivors' RANKS (row r of the compacted columns), not on source rows:

    post chunk q = ranks [q * CHUNK, (q + 1) * CHUNK); per post chunk a private table of
    local groups (order of first appearance) holding per group its order-bits word, first
    row, counts and the aggregates' partials, a sum's partial split by rank % WAYS; then
    cpu_kernels.group_merge_ids numbers and sorts the groups and cpu.py's `merge` folds the
    partials chunk by chunk. Those two are not in this module: they depend on the
    aggregates' layout only, so the caller runs the generic group kernels' and the
    aggregates' module's (compiled once per machine, as the two-step path's).

So the result does not depend on the thread count, on serial vs parallel, or on whether this
path or the two-step one ran (a chunk or the whole input with more than `limit` groups gives
up: the caller then runs the two-step path, which falls back to the sort).

Finding where post chunk q starts: a first cheap pass (`<name>_fblocks`, only for a pass
with a filter) counts the survivors per block of FBLOCK source rows; after a prefix sum,
post chunk q starts in the block holding rank q * CHUNK and walks at most FBLOCK rows
(computing only the filter) to its first survivor. Without a filter, rank = source row.

Entry points (module of `render`), the first two over a range of chunks without the GIL
(the cpu backend's morsel scheduler hands ranges to the cores: no prange, one entry point
per step):
    <name>_fblocks(c0, c1, n, boff, inputs..., params...): survivors of each block of chunks
        [c0, c1) into boff[b + 1] (the caller prefix-sums boff)
    <name>_fchunks(q0, q1, total, boff, limit, words, first, cnt, nloc, a<k>..., inputs...,
        params..., gparams...): post chunks [q0, q1) into row q of the caller's tables
        (`partials(spec)` gives the a<k>'s dtypes and widths)
    <name>_at_serial(rows, outs..., inputs..., params...): the element's outputs at `rows`
        (the groups' first rows: their keys and `first` values)

The module text leans on order_keys.NUMBA_SOURCE (order_bits, the key kinds), ops/sort/cpu_kernels.py
and ops/group/cpu_kernels.py (_GOLDEN, _table_bits, CNT_WAYS, _empty_table, rank_block): the
cpu backend links them (compiled once per machine: the module itself types no NumPy
allocation nor search, whose numba implementations compile anew in every process).
Keys whose bytes add up to more than 8 do not fit one word: `fits` says no, and the caller
keeps the two-step path.

Before compiling the module the caller asks `head_groups` (NumPy, no compile): the distinct
keys of the survivors among the first CHUNK source rows. Those survivors are the first ranks
of post chunk 0, so more than `limit` of them means post chunk 0 gives up, and so would the
whole fused path: the caller takes the two-step path at once instead of compiling a module
only to give up (TPC-H Q18's group_by of lineitem by order: thousands of groups per chunk).
"""
from __future__ import annotations

import numpy as np

from ... import order_keys
from ...ir.program import Filter, Let, Pass
from ...ir.stage_specs import GroupSpec
from .cpu import WAYS, _identity, _Printer
from ...dialects.numba_py import CHUNK, _ModulePrinter
from ...dialects.numba_py_helpers import helper_source, jit_decorator
from ..map import numba_element, numba_names
from ..join.reference import gather_filled
from ...numpy_eval import Eval

FBLOCK = 1024                       # source rows per survivor count of the first pass


def fits(key_dtypes) -> bool:
    """One exact word per row: the key bytes add up to at most 8."""
    return sum(np.dtype(d).itemsize for d in key_dtypes) <= 8


def _word_lines(dtypes, names) -> list:
    """Lines computing `w`, the keys' order bits side by side (the first key highest), as
    the stage kernels' `pack` does, from the element's key values (storage types)."""
    lines = []
    for t, (d, e) in enumerate(zip(dtypes, names)):
        dt = np.dtype(d)
        width = 8 * dt.itemsize
        if dt.kind == "f" and dt.itemsize > 2:
            raw = f"np.uint64(np.uint{width}(float_bits({e})))"
        elif dt.kind == "b":
            raw = f"np.uint64(np.uint8({e}))"
        else:                                   # ints, float16's uint16 bits
            raw = f"np.uint64(np.uint{width}({e}))"
        bits = order_keys.numba_call(raw, dt)
        lines.append(f"w = {bits}" if t == 0 else f"w = (w << np.uint64({width})) | {bits}")
    return lines


class _Fused:
    def __init__(self, p: Pass, spec: GroupSpec, keys: int, values: tuple, cache: bool):
        self.mp = _ModulePrinter(p, cache)
        self.gp = _Printer(spec, cache)
        # the folds' params as g_<name> at call sites (the pass's own are p_<name>)
        self.gp.params = "".join(f", g_{q.name}" for q in spec.params)
        self.spec, self.keys, self.values, self.cache = spec, keys, values, cache
        self.name = spec.name
        self.element = numba_element(self.mp)
        _, self.elems, self.call, self.unpack, _ = numba_names(self.mp)
        self.args = self.mp.args + self.gp.params   # inputs, pass params, fold params
        # the filter alone (the survivor counts and the walk read only what it reads)
        self.keep_fn, self.keep_call = self.mp.keep_function(), self.mp.keep_call()

    def load(self, k: int) -> str:
        """Aggregate k's value in the element (storage type -> register type)."""
        e = self.elems[self.values[k]]
        if self.spec.aggs[k].dtype == "float16":
            self.gp.helpers.add(("f16_decode", None))
            return f"_f16_decode({e})"
        return e

    def fblocks(self) -> str:
        return "\n".join([
            jit_decorator(self.cache, nogil=True),
            f"def {self.name}_fblocks({self.mp.a('c0, c1, n, boff')}):",
            '    """boff[b + 1] = survivors in source rows of block b (FBLOCK rows each), for the',
            '    blocks of chunks [c0, c1) (the caller prefix-sums them)."""',
            "    nb = (n + FBLOCK - 1) // FBLOCK",
            "    per = CHUNK // FBLOCK",
            "    for c in range(c0, c1):",
            "        for b in range(c * per, min(nb, c * per + per)):",
            "            cnt = np.int64(0)",
            "            for i in range(b * FBLOCK, min(n, b * FBLOCK + FBLOCK)):",
            f"                cnt += np.int64({self.keep_call})",
            "            boff[b + 1] = cnt"])

    def chunk(self) -> str:
        """Post chunk q: its private table (module doc)."""
        gp, n = self.gp, self.name
        ks = gp.ks
        accs = "".join(f", a{k}" for k in ks)
        filtered = self.mp.prog.has_filter
        key_dtypes = self.spec.key_dtypes
        # keys of 1-2 bytes index the table directly (the word is the slot: no hash, no probe)
        key_bytes = sum(np.dtype(d).itemsize for d in key_dtypes)
        direct = key_bytes <= 2
        L = [f"def {n}_fchunk(q, total, boff, limit, words, first, cnt{accs}, {self.args.lstrip(', ')}):",
             '    """Ranks [q * CHUNK, min(total, (q + 1) * CHUNK)) into local groups: their number,',
             '    or -1 past `limit`."""',
             "    s = q * CHUNK",
             "    e = min(total, s + CHUNK)"]
        if filtered:
            L += ["    b = rank_block(boff, s)",
                  "    i = b * FBLOCK",
                  "    r = boff[b]",
                  "    while True:                       # to the survivor of rank s",
                  f"        if {self.keep_call}:",
                  "            if r == s:",
                  "                break",
                  "            r += 1",
                  "        i += 1"]
        else:
            L += ["    i = s", "    r = s"]
        L += [f"    tbits = {8 * key_bytes if direct else '_table_bits(limit)'}",
              "    size = 1 << tbits",
              "    mask = np.uint64(size - 1)",
              "    sh = np.uint64(64 - tbits)",
              "    ids, slots = _empty_table(size)"]
        L += [f"    s{k} = np.zeros(limit, np.bool_)" for k in ks if gp.agg(k).op == "fold"]
        L += ["    m = 0",
              "    while r < e:",
              f"        {self.unpack} = {self.call}",
              "        if keep:"]
        ind = "            "
        L += [ind + x for x in _word_lines(key_dtypes, self.elems[:self.keys])]
        L += [ind + "h = w"] if direct else [
              ind + "h = (w * _GOLDEN) >> sh",
              ind + "while ids[h] >= 0 and slots[h] != w:",
              ind + "    h = (h + _U1) & mask"]
        L += [ind + "j = ids[h]",
              ind + "if j < 0:",
              ind + "    if m == limit:",
              ind + "        return -1",
              ind + "    j = m",
              ind + "    m += 1",
              ind + "    ids[h], slots[h] = j, w",
              ind + "    words[j], first[j] = w, i",
              ind + "    for t in range(CNT_WAYS):",
              ind + "        cnt[j * CNT_WAYS + t] = 0"]
        for k in ks:
            a = gp.agg(k)
            if a.op != "fold":
                L += [ind + f"    for t in range({gp.ways(k)}):",
                      ind + f"        a{k}[j * {gp.ways(k)} + t] = {_identity(a.op, a.dtype)}"]
        L += [ind + "ju = np.uint64(j)",
              ind + "cnt[ju * np.uint64(CNT_WAYS) + (np.uint64(r) & np.uint64(CNT_WAYS - 1))] += 1"]
        for k in ks:
            L.append(ind + f"x{k} = {self.load(k)}")
            L += gp.fold_into(k, f"a{k}[{gp.slot(k, 'ju', 'r')}]", f"s{k}[ju]", f"x{k}", ind)
        L += [ind + "r += 1", "        i += 1", "    return m"]
        return f"{jit_decorator(self.cache)}\n" + "\n".join(L)

    def fchunks(self) -> str:
        """Post chunks [q0, q1) into their rows of the caller's tables (morsels)."""
        gp, n = self.gp, self.name
        rows = "".join(f", a{k}[q]" for k in gp.ks)
        accs = "".join(f", a{k}" for k in gp.ks)
        return "\n".join([
            jit_decorator(self.cache, nogil=True),
            f"def {n}_fchunks(q0, q1, total, boff, limit, words, first, cnt, nloc{accs}, {self.args.lstrip(', ')}):",
            '    """nloc[q] = post chunk q\'s local groups (or -1), its table in row q of words, first,',
            '    cnt and the partials a<k>, for q in [q0, q1)."""',
            "    for q in range(q0, q1):",
            f"        nloc[q] = {n}_fchunk(q, total, boff, limit, words[q], first[q], cnt[q]{rows}, "
            f"{self.args.lstrip(', ')})"])

    def at(self) -> str:
        outs = [f"out{k}" for k in range(len(self.elems))]
        return "\n".join([
            jit_decorator(self.cache),
            f"def {self.name}_at_serial({self.mp.a('rows, ' + ', '.join(outs))}):",
            '    """The element\'s outputs at source rows `rows` (survivors all)."""',
            "    for t in range(rows.shape[0]):",
            "        i = rows[t]",
            f"        {self.unpack} = {self.call}"]
            + [f"        {o}[t] = {e}" for o, e in zip(outs, self.elems)])

    def render(self) -> str:
        funcs = [self.element, self.keep_fn] + self.gp.combines + [self.chunk(), self.fchunks(), self.at()]
        if self.mp.prog.has_filter:
            funcs.append(self.fblocks())
        helpers = [helper_source(kind, ft, self.cache)
                   for kind, ft in sorted(self.mp.helpers | self.gp.helpers, key=str)]
        header = (f"\n\n# ---- fused group_by {self.name!r} over pass {self.mp.p.name!r} (generated: "
                  f"querycompute/_codegen/ops/group/fused_cpu.py) ----\n"
                  f"FBLOCK = {FBLOCK}\nWAYS = {WAYS}")
        assert CHUNK % FBLOCK == 0
        return "\n\n\n".join([header] + helpers + funcs) + "\n"


def partials(spec: GroupSpec) -> list:
    """(NumPy dtype, ways) of each accumulating aggregate's partials (`a<k>`: `ways` values per
    local group), in the order the entry points take them."""
    gp = _Printer(spec, False)
    out = []
    for k in gp.ks:
        d = gp.agg(k).dtype
        out.append(("bool" if d == "bool" else "float32" if d == "float16" else d, gp.ways(k)))
    return out


def render(p: Pass, spec: GroupSpec, keys: int, values: tuple, cache: bool = False) -> str:
    """The fused functions of pass `p` (ToArray: its first `keys` outputs the key, output
    values[k] aggregate k's input, -1 for count) and group spec `spec` (module doc); to be
    appended to the text of the cpu stage and group kernels."""
    if not fits(spec.key_dtypes):
        raise ValueError(f"fused group_by: keys {spec.key_dtypes} are wider than one 64-bit word")
    return _Fused(p, spec, keys, values, cache).render()


def head_groups(p: Pass, keys: int, inputs, params, n: int) -> int:
    """A lower bound of the distinct keys (the first `keys` outputs of pass `p`) among the
    survivors of source rows [0, min(n, CHUNK)), evaluated with NumPy (module doc): the most
    distinct values of one key column (NaNs one value, -0.0 == 0.0: as the order bits).
    `inputs`, `params`: the pass's own (an indexed pass's index columns last)."""
    m = min(n, CHUNK)
    prog = p.program
    via = getattr(p, "via", ())
    if via:          # an indexed pass (dialects/numba_indexed.py): its inputs read through li / ri
        cols = []
        for k, v in enumerate(via):
            x = np.asarray(inputs[k])
            if v < 0:
                cols.append(x[:m])
            else:
                idx = np.asarray(inputs[v])[:m]
                cols.append(gather_filled(x, idx) if p.filled[k] else x[idx])
    else:
        cols = [np.asarray(x)[:m] for x in inputs]
    ev = Eval(cols, params, tuple(s.name for s in prog.params), m, 0)
    keep = None
    with np.errstate(all="ignore"):
        for st in prog.body:
            if isinstance(st, Let):
                ev.vars[st.name] = ev(st.expr)
            elif isinstance(st, Filter):
                f = ev.full(st.cond)
                keep = f.copy() if keep is None else keep & f
        outs = [ev.full(e) for e in prog.outputs[:keys]]
    return max((len(np.unique(o if keep is None else o[keep])) for o in outs), default=0)
