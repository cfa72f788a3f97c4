"""The numba dialect of group_by's aggregates (stage_specs.GroupSpec): a module that folds
every value column per group, all aggregates in one pass over the rows. The group of each
row comes from the cpu stage runtime (backends/cpu_group.py), so the module depends on the
aggregates and params only, never on the key dtypes nor on the query: its functions are named
NAME_<step> ("aggs_merge", ...) whatever the GroupSpec's name, so every query with the same
aggregates and params prints one text, a module compiled once per machine (then a disk-cache
hit), not once per query. <name> below is NAME.

THE ORDER (the same in both entry points, so they give the same bits): a group's rows are
split by SOURCE chunk (row index // CHUNK, CHUNK fixed: independent of the thread count);
each chunk's rows are folded in source order into a partial, and the partials are folded in
chunk order; a fold's seed is combined in front at the end. sum/min/max/any/all start their
partials and total from an exact identity (sum -0.0 or 0, min +inf or the type's max, ...),
so `identity + x0` is x0; a fold (no identity) starts from its first element. A SUM's
chunk partial is itself WAYS partials (rows i with i % WAYS == r, each in source order),
folded r = 0..WAYS-1: four independent chains of adds instead of one through a single
memory cell (a sum is commutative; min/max keep one chain so that the earlier of equal
values wins, folds one so that element order is kept).

    low cardinality (the chunk-local group id lid[i] of every row from the runtime):
    <name>_low_alloc(nch, L) -> the partials' arrays, one per aggregate (nch x L slots)
    <name>_low_chunks(c0, c1, lid, nloc, partials..., values..., params...)
        chunks [c0, c1): each chunk's private table of partials indexed by lid
    <name>_merge(nloc, remap, G, partials..., params...) -> the G results
        chunks in order, their partials folded into remap[c, j] (their sorted group)
    any cardinality (perm lists the rows group by group: a stable sort of the keys, each
    group's rows in source order; starts[g]..starts[g + 1] are group g's):
    <name>_seg_alloc(G) -> the results' arrays
    <name>_seg_blocks(b0, b1, perm, starts, results..., values..., params...)
        blocks [b0, b1) of SEG_BLOCK groups, each group's rows one after another with the
        chunk rule above
The steps over ranges (chunks, blocks) run without the GIL, by the cpu backend's morsel
scheduler (backends/cpu/cpu_group.py); each writes only its own chunks' or groups' slots.

sum, min and max of float16 accumulate in float32 (as NumPy's half reductions do); results
come back in the register type (float32 for float16) and the runtime casts them. min/max
propagate NaN and keep the earlier of equal values (np.minimum / np.maximum). count and
first are not computed here (the runtime has them from the group ids).

A fold not known associative (GroupAgg.in_order) has no partials: only the seg entry point
serves it (the runtime skips the low one, `in_order`), folding each group's rows one after
another from the seed, in source order (groups still in parallel blocks: they are
independent).
"""
from __future__ import annotations

import numpy as np

from ...ir.stage_specs import GroupAgg, GroupSpec
from ...dialects.numba_py import CHUNK
from ...dialects.numba_py_expr import ExprPrinter, const_text, register_type
from ...dialects.numba_py_helpers import helper_source, jit_decorator
from ...dialects.numba_py_runtime import PRELUDE

NAME = "aggs"                          # the module's functions' prefix (module doc)
SEG_BLOCK = 4096                        # groups per parallel task of the seg entry point
WAYS = 4                               # partials per chunk and group of a sum (a power of 2)
ACCUMULATING = ("sum", "min", "max", "any", "all", "fold")


def _identity(op: str, d: str) -> str:
    """The exact identity of op's combine over dtype d (as register-type text)."""
    rt = register_type(d)
    if d == "bool":
        return {"sum": "False", "max": "False", "any": "False", "min": "True", "all": "True"}[op]
    if d.startswith("float"):
        return {"sum": f"{rt}(-0.0)", "min": f"{rt}(np.inf)", "max": f"{rt}(-np.inf)"}[op]
    info = np.iinfo(d)
    return {"sum": f"{rt}(0)", "min": f"{rt}({info.max})", "max": f"{rt}({info.min})"}[op]


def _step(op: str, d: str, a: str, x: str) -> str:
    """The combine of accumulator `a` and value `x` (plain names) for a non-fold op."""
    if op == "sum":
        return f"({a} or {x})" if d == "bool" else f"{register_type(d)}({a} + {x})"
    if op == "min":     # NaN wins (x != x only for a NaN x; a NaN a is never replaced)
        return f"({x} if ({x} < {a} or {x} != {x}) else {a})"
    if op == "max":
        return f"({x} if ({x} > {a} or {x} != {x}) else {a})"
    return f"({a} or {x})" if op == "any" else f"({a} and {x})"


class _Printer:
    def __init__(self, spec: GroupSpec, cache: bool):
        if not spec.name.isidentifier():
            raise ValueError(f"GroupSpec.name {spec.name!r} is not a valid identifier")
        self.spec, self.cache, self.name = spec, cache, spec.name
        self.helpers: set = set()
        self.ks = [k for k, a in enumerate(spec.aggs) if a.op in ACCUMULATING]
        self.params = "".join(f", p_{p.name}" for p in spec.params)
        self.vals = "".join(f", v{k}" for k in self.ks)
        self.combines = [self._combine(k, spec.aggs[k]) for k in self.ks if spec.aggs[k].op == "fold"]

    # ---- per aggregate spellings ----------------------------------------------------------
    def agg(self, k: int) -> GroupAgg:
        return self.spec.aggs[k]

    def ways(self, k: int) -> int:
        return WAYS if self.agg(k).op == "sum" else 1

    def slot(self, k: int, j: str, i: str) -> str:
        """The table index of row i's partial of local group j (module doc: WAYS)."""
        if self.ways(k) == 1:
            return j
        return f"{j} * np.uint64(WAYS) + (np.uint64({i}) & np.uint64(WAYS - 1))"

    def array_type(self, k: int) -> str:
        d = self.agg(k).dtype
        return "np.bool_" if d == "bool" else register_type(d)

    def load(self, k: int, i: str) -> str:
        if self.agg(k).dtype == "float16":
            self.helpers.add(("f16_decode", None))
            return f"_f16_decode(v{k}[np.uint64({i})])"
        return f"v{k}[np.uint64({i})]"

    def fold_into(self, k: int, acc: str, seen: str, x: str, ind: str) -> list:
        """Lines folding value name `x` into `acc` (a fold: `seen` says acc holds one)."""
        a = self.agg(k)
        if a.op != "fold":
            return [f"{ind}{acc} = {_step(a.op, a.dtype, acc, x)}"] if acc.isidentifier() else [
                f"{ind}y{k} = {acc}", f"{ind}{acc} = {_step(a.op, a.dtype, f'y{k}', x)}"]
        return [f"{ind}if {seen}:", f"{ind}    {acc} = {self.name}_combine{k}({acc}, {x}{self.params})",
                f"{ind}else:", f"{ind}    {acc} = {x}", f"{ind}    {seen} = True"]

    def _combine(self, k: int, a: GroupAgg) -> str:
        ep = ExprPrinter(lambda i: "", lambda pname: f"p_{pname}", "i", self.helpers)
        ep.bind_var("acc", "acc")
        ep.bind_var("item", "item")
        result = ep.value(a.combine)
        ret = result if a.dtype == "bool" else f"{register_type(a.dtype)}({result})"
        body = "".join(f"    {line}\n" for line in ep.lines)
        return (f"{jit_decorator(self.cache)}\ndef {self.name}_combine{k}(acc, item{self.params}):\n"
                f'    """aggregate {k}\'s combine(acc, item): acc folds the earlier rows."""\n'
                f"{body}    return {ret}")

    def seed(self, k: int) -> str:
        a = self.agg(k)
        return const_text(a.seed.value, a.dtype)

    # ---- functions --------------------------------------------------------------------------
    def chunk(self) -> str:
        """One chunk's partials: a[k][j] for local group j."""
        n, ks = self.name, self.ks
        accs = "".join(f", a{k}" for k in ks)
        lines = [f"def {n}_chunk(lid, lo, hi, m{accs}{self.vals}{self.params}):",
                 '    """Partials of rows [lo, hi) per local group (lid), in row order."""',
                 "    for j in range(m):"]
        lines += [f"        for r in range({self.ways(k)}):\n"
                  f"            a{k}[j * {self.ways(k)} + r] = {_identity(self.agg(k).op, self.agg(k).dtype)}"
                  for k in ks if self.agg(k).op != "fold"] or ["        pass"]
        lines += [f"    s{k} = np.zeros(max(m, 1), np.bool_)" for k in ks if self.agg(k).op == "fold"]
        lines += ["    for i in range(lo, hi):", "        j = np.uint64(lid[np.uint64(i)])"]
        for k in ks:
            lines.append(f"        x{k} = {self.load(k, 'i')}")
            lines += self.fold_into(k, f"a{k}[{self.slot(k, 'j', 'i')}]", f"s{k}[j]", f"x{k}", "        ")
        return f"{jit_decorator(self.cache)}\n" + "\n".join(lines)

    def merge(self) -> str:
        """The partials of every chunk, chunks in order, into the G results."""
        n, ks = self.name, self.ks
        accs = "".join(f", a{k}" for k in ks)
        lines = [f"def {n}_merge(nloc, remap, G{accs}{self.params}):",
                 '    """Chunk partials folded into their sorted groups, chunks in order."""']
        for k in ks:
            lines.append(f"    r{k} = np.empty(G, {self.array_type(k)})")
            if self.agg(k).op == "fold":
                lines.append(f"    s{k} = np.zeros(G, np.bool_)")
        lines.append("    for g in range(G):")
        lines += [f"        r{k}[g] = {_identity(self.agg(k).op, self.agg(k).dtype)}"
                  for k in ks if self.agg(k).op != "fold"] or ["        pass"]
        lines += ["    for c in range(nloc.shape[0]):", "        for j in range(nloc[c]):",
                  "            g = remap[c, j]"]
        for k in ks:
            if self.ways(k) == 1:
                lines.append(f"            x{k} = a{k}[c, j]")
                lines += self.fold_into(k, f"r{k}[g]", f"s{k}[g]", f"x{k}", "            ")
                continue
            lines += [f"            for r in range({self.ways(k)}):",
                      f"                x{k} = a{k}[c, j * {self.ways(k)} + r]"]
            lines += self.fold_into(k, f"r{k}[g]", f"s{k}[g]", f"x{k}", "                ")
        lines += self.seed_lines("r{k}[g]", "    for g in range(G):", "        ")
        lines.append(f"    return ({''.join(f'r{k}, ' for k in ks)})")
        return f"{jit_decorator(self.cache, nogil=True)}\n" + "\n".join(lines)

    def seed_lines(self, acc: str, loop: str, ind: str) -> list:
        folds = [k for k in self.ks if self.agg(k).op == "fold" and not self.agg(k).in_order]
        if not folds:
            return []
        out = [loop] if loop else []
        for k in folds:
            a = acc.format(k=k)
            out.append(f"{ind}{a} = {self.name}_combine{k}({self.seed(k)}, {a}{self.params})")
        return out

    def low(self) -> list:
        """The low-cardinality steps: the partials' allocation and the chunks' pass."""
        n, ks = self.name, self.ks
        alloc = [f"def {n}_low_alloc(nch, L):",
                 '    """The partials of every chunk and local group (module doc)."""']
        alloc += [f"    a{k} = np.empty((nch, L * {self.ways(k)}), {self.array_type(k)})" for k in ks]
        alloc.append(f"    return ({''.join(f'a{k}, ' for k in ks)})")
        accs = "".join(f", a{k}" for k in ks)
        rows = "".join(f", a{k}[c]" for k in ks)
        chunks = [f"def {n}_low_chunks(c0, c1, lid, nloc{accs}{self.vals}{self.params}):",
                  '    """Chunks [c0, c1): their partials per local group (module doc)."""',
                  "    n = lid.shape[0]",
                  "    for c in range(c0, c1):",
                  f"        {n}_chunk(lid, c * CHUNK, min(n, c * CHUNK + CHUNK), nloc[c]{rows}"
                  f"{self.vals}{self.params})"]
        deco = jit_decorator(self.cache, nogil=True)
        return [f"{deco}\n" + "\n".join(alloc), f"{deco}\n" + "\n".join(chunks)]

    def segment(self) -> str:
        """One group of the seg entry point: its rows perm[s:e] with the chunk rule; a sum's
        WAYS partials live in the scratch array w<k>."""
        n, ks = self.name, self.ks
        res = "".join(f", r{k}" for k in ks)
        scratch = "".join(f", w{k}" for k in ks if self.ways(k) > 1)
        lines = [f"def {n}_segment(perm, s, e, g{res}{scratch}{self.vals}{self.params}):",
                 '    """Group g: rows perm[s:e] (source order) by source chunk, in order."""']
        for k in ks:
            a = self.agg(k)
            init = self.seed(k) if a.op == "fold" else _identity(a.op, a.dtype)
            lines.append(f"    t{k} = {init}")             # the total
            if self.ways(k) > 1:
                lines += ["    for r in range(WAYS):", f"        w{k}[r] = {init}"]
            else:
                lines.append(f"    p{k} = {init}")         # the current chunk's partial
            if a.op == "fold":
                lines += [f"    st{k} = False", f"    sp{k} = False"]
        lines += ["    cur = perm[s] // CHUNK", "    for q in range(s, e):",
                  "        i = perm[q]", "        if i // CHUNK != cur:", "            cur = i // CHUNK"]
        lines += self.close_chunk("            ")
        for k in ks:
            lines.append(f"        x{k} = {self.load(k, 'i')}")
            if self.agg(k).in_order:          # the seed first, every row in order
                lines.append(f"        t{k} = {n}_combine{k}(t{k}, x{k}{self.params})")
            elif self.ways(k) > 1:
                lines += self.fold_into(k, f"w{k}[np.uint64(i) & np.uint64(WAYS - 1)]", "", f"x{k}", "        ")
            else:
                lines += self.fold_into(k, f"p{k}", f"sp{k}", f"x{k}", "        ")
        lines += self.close_chunk("    ")
        lines += self.seed_lines("t{k}", "", "    ")
        lines += [f"    r{k}[g] = t{k}" for k in ks]
        return f"{jit_decorator(self.cache)}\n" + "\n".join(lines)

    def close_chunk(self, ind: str) -> list:
        """Lines folding the current chunk's partials into the totals (and resetting them)."""
        out = []
        for k in self.ks:
            a = self.agg(k)
            init = self.seed(k) if a.op == "fold" else _identity(a.op, a.dtype)
            if a.in_order:                    # folded into the total row by row
                continue
            if self.ways(k) > 1:
                out += [f"{ind}for r in range(WAYS):", f"{ind}    z{k} = w{k}[r]"]
                out += self.fold_into(k, f"t{k}", "", f"z{k}", ind + "    ")
                out.append(f"{ind}    w{k}[r] = {init}")
            else:
                out += self.fold_into(k, f"t{k}", f"st{k}", f"p{k}", ind)
                out.append(f"{ind}p{k} = {init}")
                if a.op == "fold":
                    out.append(f"{ind}sp{k} = False")
        return out

    def seg(self) -> list:
        """The any-cardinality steps: the results' allocation and the groups' pass."""
        n, ks = self.name, self.ks
        res = "".join(f", r{k}" for k in ks)
        scratch = "".join(f", w{k}" for k in ks if self.ways(k) > 1)
        alloc = [f"def {n}_seg_alloc(G):", '    """The results of G groups."""']
        alloc += [f"    r{k} = np.empty(G, {self.array_type(k)})" for k in ks]
        alloc.append(f"    return ({''.join(f'r{k}, ' for k in ks)})")
        blocks = [f"def {n}_seg_blocks(b0, b1, perm, starts{res}{self.vals}{self.params}):",
                  '    """Blocks [b0, b1) of SEG_BLOCK groups, each over its sorted rows (module doc)."""',
                  "    G = starts.shape[0] - 1"]
        blocks += [f"    w{k} = np.empty(WAYS, {self.array_type(k)})" for k in ks if self.ways(k) > 1]
        blocks += ["    for g in range(b0 * SEG_BLOCK, min(G, b1 * SEG_BLOCK)):",
                   f"        {n}_segment(perm, starts[g], starts[g + 1], g{res}{scratch}{self.vals}{self.params})"]
        deco = jit_decorator(self.cache, nogil=True)
        return [f"{deco}\n" + "\n".join(alloc), f"{deco}\n" + "\n".join(blocks)]

    def render(self) -> str:
        funcs = self.combines + [self.chunk(), self.merge(), *self.low(), self.segment(), *self.seg()]
        s = self.spec
        aggs = ", ".join(f"{k}: {a.op} {a.dtype}" for k, a in enumerate(s.aggs))
        header = (f'"""querycompute cpu group_by {s.name!r} (dialect numba, generated).\n\n'
                  f"aggregates: {aggs}\n"
                  f"params: {', '.join(f'{p.name}: {p.dtype}' for p in s.params) or 'none'}\n"
                  f"The order of every fold: querycompute/_codegen/ops/group/cpu.py.\n"
                  f'Globals come from querycompute._codegen.dialects.numba_py_runtime.namespace().\n"""\n'
                  f"CHUNK = {CHUNK}\nSEG_BLOCK = {SEG_BLOCK}\nWAYS = {WAYS}")
        helper_src = [helper_source(kind, ft, self.cache) for kind, ft in sorted(self.helpers, key=str)]
        return "\n\n\n".join([header] + helper_src + funcs) + "\n"


def in_order(spec: GroupSpec) -> bool:
    """Whether a fold of `spec` is in_order (module doc): the seg entry point only."""
    return any(a.op == "fold" and a.in_order for a in spec.aggs)


def accumulating(spec: GroupSpec) -> list:
    """Indices of the aggregates the module computes (the others: count, first)."""
    return [k for k, a in enumerate(spec.aggs) if a.op in ACCUMULATING]


def render(spec: GroupSpec, cache: bool = False) -> str:
    """The module source of `spec`'s aggregates (key dtypes and the spec's name play no part:
    see module doc); with `cache=True` it carries the prelude that pulls numba_py_runtime's
    namespace in."""
    spec = GroupSpec((), spec.aggs, spec.params, NAME)
    text = _Printer(spec, cache).render()
    return (PRELUDE + text) if cache else text
