"""CPU lowering of the reduce op: prints its numba kernels (chunk partials, entries, combine).

Every Agg owns a few state variables. Per element, the chunk loop updates all of them
without branching (a dropped element contributes the identity), so LLVM vectorises the
loop. Per chunk the state is returned as a tuple, stored in per-chunk arrays, and combined
in chunk order by the entry point, which makes results deterministic (and the same for a
strided input as for a contiguous one: see `_entry`).

Float sums (float16, float32, float64) add in one fixed order, spelled out in the printed
code (_codegen/sum_order.py): a block's values are stored in a buffer, its rows of LANES
values added into a lane array row after row (`A += row`, elementwise: LLVM vectorises it
without regrouping an add, and no function carries `reassoc`), the lanes, the blocks of a
chunk and the chunks added as balanced trees. The order does not depend on the machine's
vector width, and the numpy tier reproduces it (sum_order.chunk_totals), so a sum's bits
never depend on the tier. The result is +0.0 + total, so a sum of -0.0s is +0.0, as np.sum
gives; float16 lanes round after every add, as a float16 register (and NumPy's half adds)
would. (Indexes into the buffer are unsigned: no negative-index fix-ups in the loop.)

State per op (agg k):
  sum    s_k                     float identity is -0.0 (x + -0.0 == x for every x, -0.0 too)
  count  s_k (int64)
  min    s_k, nan_k              plain compare-select min plus an any-NaN flag: vectorisable
  max    s_k, nan_k              and NaN-correct (a NaN anywhere makes the result NaN)
  any    s_k (bool)
  all    s_k (bool)
  first  s_k (int64 index, -1 = none), s_k_0.. values of that element
  fold   s_k, h_k                the value and whether any element went in (h_k): chunks
                                 combine in order, an empty one is skipped, and the seed
                                 goes in once at the end: combine(seed, total) or the seed
                                 (<name>_fold<k> is the combine, fastmath off)
         in order                a fold not known associative (Agg.in_order): s_k starts at
                                 the seed and folds every survivor in element order; the
                                 pass then runs as ONE chunk (a sequential loop), so
                                 nothing is regrouped: LINQ's fold exactly
"""
from __future__ import annotations

from ... import dtypes as D
from ...order_keys import minmax_key, minmax_key_text
from ...dialects.numba_py_expr import ExprPrinter, const_text, register_type
from ...ir.program import Agg, Pass
from ...sum_order import BLOCK, LANES


def _type_max(d: str) -> str:
    return const_text(float("inf"), d) if D.is_float(d) else const_text(D.int_limits(d)[1], d)


def _type_min(d: str) -> str:
    return const_text(float("-inf"), d) if D.is_float(d) else const_text(D.int_limits(d)[0], d)


def _key_type(d: str) -> tuple[str, int]:
    """Integer type and width of a float dtype's order keys (float16 is held in float32)."""
    return ("np.int64", 64) if d == "float64" else ("np.int32", 32)


def _key_float(d: str) -> str:
    return "np.float64" if d == "float64" else "np.float32"


def _seed(agg: Agg) -> str:
    """A fold's seed as a literal of its accumulator type."""
    return const_text(agg.seed.value, agg.dtype) if agg.dtype != "bool" else str(bool(agg.seed.value))


def _zero(d: str) -> str:
    return const_text(0, d) if d != "bool" else "False"


class ReducePrinter:
    def __init__(self, p: Pass, element: str, args: str, helpers: set, jits: dict):
        """`jits`: the decorator lines by function kind (see dialects.numba_py._ModulePrinter)."""
        self.p = p
        self.aggs: tuple[Agg, ...] = p.terminal.aggs
        self.element = element
        self.args = args
        self.helpers = helpers
        self.jits = jits
        self.first_only = all(a.op == "first" for a in self.aggs)
        # a fold not known associative: one chunk, in element order (module doc)
        self.in_order = any(a.op == "fold" and a.in_order for a in self.aggs)
        # float sums: lanes, blocks and chunks in sum_order's fixed order
        self.float_sums = [k for k, a in enumerate(self.aggs) if a.op == "sum" and D.is_float(a.dtype)]
        self.inputs = [f"in_{s.name}" for s in p.program.inputs]
        # element return names, per agg, in the element's return order
        self.values: list[list[str]] = []
        k = 0
        for agg in self.aggs:
            width = 2 if self._masked_minmax(agg) else len(agg.values)
            self.values.append([f"e{k + j}" for j in range(width)])
            k += width

    @staticmethod
    def _masked_minmax(agg: Agg) -> bool:
        return agg.op in ("min", "max") and D.is_float(agg.dtype)

    def element_returns(self, values: list[str], lines: list[str]) -> list[str]:
        """What the element function returns for the aggs, given the names of the agg
        values (in agg order); may append statements (after `keep` is defined) to `lines`.

        A float min/max agg gets (order key of the value, or of the identity when dropped
        or NaN; is a kept NaN): the chunk reduces integer keys, which LLVM vectorises, and a
        separate flag makes the result NaN (numba_py_runtime explains the keys)."""
        out, j = [], 0
        for k, agg in enumerate(self.aggs):
            vals = values[j:j + len(agg.values)]
            j += len(agg.values)
            if self._masked_minmax(agg):
                v = vals[0]
                ident = _type_max(agg.dtype) if agg.op == "min" else _type_min(agg.dtype)
                kt, w = _key_type(agg.dtype)
                lines.append(f"# agg {k} ({agg.op}): integer order key of the value (of the "
                             f"identity when dropped or NaN), and a kept-NaN flag")
                lines.append(f"b{k} = float_bits({_key_float(agg.dtype)}({v} if (keep & ({v} == {v})) else {ident}))")
                lines.append(f"m{k} = {kt}({minmax_key_text(f'b{k}', w)})")
                lines.append(f"n{k} = keep & ({v} != {v})")
                out += [f"m{k}", f"n{k}"]
            else:
                out += vals
        return out

    def _a(self, rest: str = "") -> str:
        """Argument list: `rest` followed by the inputs and params."""
        return ", ".join(x for x in (rest, self.args) if x)

    def render(self) -> list[str]:
        out = [self._fold_fn(k, agg) for k, agg in enumerate(self.aggs) if agg.op == "fold"]
        for f16 in sorted({self.aggs[k].dtype == "float16" for k in self.float_sums}):
            out.append(self._pairwise_fn(f16))
        out.append(self._chunk())
        out.append(self._entry())
        return out

    # ---- state ---------------------------------------------------------------------------
    def _state(self, k: int, agg: Agg) -> list[tuple[str, str, str]]:
        """(name, numpy type, initial value) of agg k's state variables."""
        d = agg.dtype
        T = register_type(d) if d != "bool" else "np.bool_"
        if agg.op == "sum":
            init = const_text(-0.0, d) if D.is_float(d) else _zero(d)
            return [(f"s{k}", T, init)]
        if agg.op == "count":
            return [(f"s{k}", "np.int64", "np.int64(0)")]
        if agg.op in ("min", "max") and D.is_float(d):     # order keys, see element_returns
            kt, _ = _key_type(d)
            key = minmax_key(float("inf") if agg.op == "min" else float("-inf"), d)
            return [(f"s{k}", kt, f"{kt}({key})"), (f"nan{k}", "np.bool_", "False")]
        if agg.op in ("min", "max"):
            return [(f"s{k}", T, _type_max(d) if agg.op == "min" else _type_min(d))]
        if agg.op in ("any", "all"):
            return [(f"s{k}", "np.bool_", "True" if agg.op == "all" else "False")]
        if agg.op == "first":
            vals = [(f"s{k}_{j}", register_type(v.dtype) if v.dtype != "bool" else "np.bool_",
                     _zero(v.dtype)) for j, v in enumerate(agg.values)]
            return [(f"s{k}", "np.int64", "np.int64(-1)")] + vals
        if agg.op == "fold":
            if agg.seed is None or agg.combine is None:
                raise ValueError("a fold Agg needs both `combine` and `seed`")
            return [(f"s{k}", T, _seed(agg) if agg.in_order else _zero(d)), (f"h{k}", "np.bool_", "False")]
        raise ValueError(f"unknown aggregate op {agg.op!r}")

    def _update(self, k: int, agg: Agg) -> list[str]:
        """Chunk-loop statements folding element i (kept or not) into agg k's state."""
        s, d, v = f"s{k}", agg.dtype, self.values[k]
        if agg.op == "sum":
            if d == "float16":                       # round after every add, like NumPy
                self.helpers.add(("f16", None))
                return [f"{s} = _f16(np.float32({s} + {v[0]})) if keep else {s}"]
            ident = const_text(-0.0, d) if D.is_float(d) else _zero(d)
            return [f"{s} = {register_type(d)}({s} + ({v[0]} if keep else {ident}))"]
        if agg.op == "count":
            return [f"{s} += np.int64(keep)"]
        if agg.op in ("min", "max") and D.is_float(d):
            cmp = "<" if agg.op == "min" else ">"
            return [f"{s} = {v[0]} if {v[0]} {cmp} {s} else {s}", f"nan{k} = nan{k} | {v[1]}"]
        if agg.op in ("min", "max"):
            cmp = "<" if agg.op == "min" else ">"
            return [f"{s} = {v[0]} if (keep & ({v[0]} {cmp} {s})) else {s}"]
        if agg.op == "any":
            return [f"{s} = {s} | (keep & {v[0]})"]
        if agg.op == "all":
            return [f"{s} = {s} & ({v[0]} | (not keep))"]
        if agg.op == "first":
            sets = "; ".join(f"{s}_{j} = {e}" for j, e in enumerate(v))
            return [f"if keep and {s} < 0:", f"    {s} = np.int64(i)" + (f"; {sets}" if sets else "")]
        if agg.in_order:
            return ["if keep:", f"    {s} = {self.p.name}_fold{k}({s}, {v[0]}{self._fold_params()})"]
        return ["if keep:",
                f"    {s} = {self.p.name}_fold{k}({s}, {v[0]}{self._fold_params()}) if h{k} else {v[0]}",
                f"    h{k} = True"]

    def _combine(self, k: int, agg: Agg) -> list[str]:
        """Entry statements folding chunk c's partials (arrays P_<state>) into the totals."""
        s, d = f"s{k}", agg.dtype
        if agg.op == "sum":
            if d == "float16":
                return [f"{s} = _f16(np.float32({s} + P_{s}[c]))"]
            return [f"{s} = {register_type(d)}({s} + P_{s}[c])"]
        if agg.op == "count":
            return [f"{s} += P_{s}[c]"]
        if agg.op in ("min", "max"):
            cmp = "<" if agg.op == "min" else ">"
            lines = [f"{s} = P_{s}[c] if P_{s}[c] {cmp} {s} else {s}"]
            if D.is_float(d):
                lines.append(f"nan{k} = nan{k} | P_nan{k}[c]")
            return lines
        if agg.op == "any":
            return [f"{s} = {s} | P_{s}[c]"]
        if agg.op == "all":
            return [f"{s} = {s} & P_{s}[c]"]
        if agg.op == "first":
            sets = "".join(f"; {name} = P_{name}[c]" for name, _, _ in self._state(k, agg)[1:])
            return [f"if {s} < 0 and P_{s}[c] >= 0:", f"    {s} = P_{s}[c]{sets}"]
        if agg.in_order:                  # the one chunk's value (the seed when n == 0)
            return [f"{s} = P_{s}[c]"]
        return [f"if P_h{k}[c]:",
                f"    {s} = {self.p.name}_fold{k}({s}, P_{s}[c]{self._fold_params()}) if h{k} else P_{s}[c]",
                f"    h{k} = True"]

    def _finish(self, k: int, agg: Agg) -> list[str]:
        if agg.op == "fold" and agg.in_order:
            return [f"r{k} = s{k}"]
        if agg.op == "fold":
            seed = _seed(agg)
            return [f"r{k} = {self.p.name}_fold{k}({seed}, s{k}{self._fold_params()}) if h{k} else {seed}"]
        if k in self.float_sums:        # -0.0 + 0.0 is +0.0; every other total is unchanged
            return [f"s{k} = {register_type(agg.dtype)}(s{k} + {const_text(0.0, agg.dtype)})"]
        if agg.op in ("min", "max") and D.is_float(agg.dtype):
            kt, w = _key_type(agg.dtype)
            value = f"bits_float({kt}({minmax_key_text(f's{k}', w)}))"
            nan = const_text(float("nan"), agg.dtype)
            return [f"r{k} = {nan} if nan{k} else {register_type(agg.dtype)}({value})"]
        return []

    def _result_names(self) -> list[str]:
        names = []
        for k, agg in enumerate(self.aggs):
            names.append(f"r{k}" if self._masked_minmax(agg) or agg.op == "fold" else f"s{k}")
            if agg.op == "first":
                names += [f"s{k}_{j}" for j in range(len(agg.values))]
        return names

    # ---- functions -----------------------------------------------------------------------
    def _fold_params(self) -> str:
        """", p_<name>..." : the captured values a fold's combine may read (they are in
        scope, under these names, wherever the fold function is called)."""
        return "".join(f", p_{s.name}" for s in self.p.program.params)

    def _fold_fn(self, k: int, agg: Agg) -> str:
        ep = ExprPrinter(lambda i: "", lambda name: f"p_{name}", "i", self.helpers)
        ep.bind_var("acc", "acc")
        ep.bind_var("item", "item")
        result = ep.value(agg.combine)
        body = "".join(f"    {line}\n" for line in ep.lines)
        return (f"{self.jits['scalar']}\n"
                f"def {self.p.name}_fold{k}(acc, item{self._fold_params()}):\n"
                + (f'    """The fold combine of agg {k}: not known associative, so one sequential '
                   f'pass folds every element in order."""\n' if agg.in_order else
                   f'    """The fold combine of agg {k}: associative, so per-chunk partials '
                   f'combine in order."""\n') +
                f"{body}    return {result}")

    def _chunk(self) -> str:
        states = [st for k, agg in enumerate(self.aggs) for st in self._state(k, agg)]
        init = "".join(f"    {name} = {value}\n" for name, _, value in states)
        ncall = sum(len(v) for v in self.values)
        unpack = "".join(f"{x}, " for x in ["keep"] + [f"e{j}" for j in range(ncall)]).rstrip()
        call = f"{self.element}({self._a('np.uint64(i)')})"
        loop = [f"{unpack} = {call}"]
        if self.first_only:             # stop at the chunk's first survivor
            found = [x for vals in self.values for x in ["np.int64(i)"] + vals]
            loop += ["if keep:", f"    return ({', '.join(found)},)"]
        else:
            for k, agg in enumerate(self.aggs):
                loop += self._update(k, agg)
        ret = ", ".join(name for name, _, _ in states)
        return (f"{self.jits['chunk']}\n"
                f"def {self.p.name}_chunk({self._a('lo, hi')}):\n"
                f'    """Partial state of elements [lo, hi); float sums in sum_order\'s fixed\n'
                f'    order (lane arrays added row by row, trees of lanes and blocks)."""\n'
                f"{init}"
                + "".join(f"    {line}\n" for line in self._blocks(loop)) +
                f"    return ({ret},)")

    def _blocks(self, body: list[str]) -> list[str]:
        """The chunk's loop over i around `body` (the element call, then every agg's
        update). With float sums (sum_order's order), per block of BLOCK elements: the
        element loop stores each float sum's value (-0.0 when dropped) in V<k> (a map loop
        LLVM vectorises), -0.0 fills a short block's rest; V<k>'s rows of LANES values are
        added into the lane array A<k> row after row (a loop over the LANES lanes:
        elementwise, so LLVM vectorises it without regrouping an add; loops, not numba
        array expressions like `A += V[r:r + LANES]`, whose typing cost ~3 s of compile per
        pass), A<k>'s lanes as a tree into B<k>, and the block totals as a tree (pairwise)."""
        if not self.float_sums:
            return ["for i in range(lo, hi):", *[f"    {line}" for line in body]]
        out = []
        for k in self.float_sums:
            T = register_type(self.aggs[k].dtype)
            out += [f"B{k} = np.empty((hi - lo + {BLOCK - 1}) // {BLOCK}, {T})",
                    f"V{k} = np.empty({BLOCK}, {T})", f"A{k} = np.empty({LANES}, {T})"]
        out += ["nb = 0", f"for b in range(lo, hi, {BLOCK}):", f"    be = min(hi, b + {BLOCK})",
                "    for i in range(b, be):", f"        {body[0]}"]
        for k, agg in enumerate(self.aggs):
            if k in self.float_sums:
                zero = const_text(-0.0, agg.dtype)
                out.append(f"        V{k}[np.uint64(i - b)] = {register_type(agg.dtype)}({self.values[k][0]} if keep else {zero})")
            else:
                out += [f"        {line}" for line in self._update(k, agg)]
        out.append(f"    for i in range(be - b, {BLOCK}):")
        out += [f"        V{k}[np.uint64(i)] = {const_text(-0.0, self.aggs[k].dtype)}" for k in self.float_sums]
        for k in self.float_sums:
            out += [f"    for j in range({LANES}):", f"        A{k}[j] = V{k}[j]",
                    f"    for r in range({LANES}, {BLOCK}, {LANES}):",
                    f"        for j in range({LANES}):"]
            if self.aggs[k].dtype == "float16":        # rounded after every add: no vectors
                self.helpers.add(("f16", None))
                out.append(f"            A{k}[j] = _f16(np.float32(A{k}[j] + V{k}[np.uint64(r + j)]))")
            else:
                out.append(f"            A{k}[j] += V{k}[np.uint64(r + j)]")
            out.append(f"    B{k}[nb] = {self._pairwise_name(k)}(A{k}, {LANES}, {const_text(-0.0, self.aggs[k].dtype)})")
        out.append("    nb += 1")
        return out + [f"s{k} = {self._pairwise_name(k)}(B{k}, nb, s{k})" for k in self.float_sums]

    def _pairwise_name(self, k: int) -> str:
        return f"{self.p.name}_pairwise" + ("16" if self.aggs[k].dtype == "float16" else "")

    def _pairwise_fn(self, f16: bool) -> str:
        add = "_f16(np.float32(buf[2 * j] + buf[2 * j + 1]))" if f16 else "buf[2 * j] + buf[2 * j + 1]"
        if f16:
            self.helpers.add(("f16", None))
        return (f"{self.jits['scalar']}\n"
                f"def {self.p.name}_pairwise{'16' if f16 else ''}(buf, m, empty):\n"
                f'    """Sum of buf[:m] as a balanced tree of adds (in place, strict IEEE'
                f'{", float16 rounding" if f16 else ""}):\n'
                f'    rounding error O(log m) ulp. `empty` (typed like buf) when m == 0."""\n'
                f"    while m > 1:\n"
                f"        h = m // 2\n"
                f"        for j in range(h):\n"
                f"            buf[j] = {add}\n"
                f"        if m % 2:\n"
                f"            buf[h] = buf[m - 1]\n"
                f"        m = h + m % 2\n"
                f"    return buf[0] if m == 1 else empty")

    def _entry(self) -> str:
        """`<pass>_chunks(c0, c1, nfin, n, P_<state>..., inputs..., params...)`: the partials of
        chunks [c0, c1) into the caller's per-chunk arrays P_<state> (one element per chunk,
        their dtypes in `<pass>_PARTIALS`), then the partials of the first `nfin` chunks
        combined in chunk order and finished: the caller passes nfin = 0 for a morsel and
        nfin = all chunks once they are all done (or in the one call that does all of them),
        so the result is the same whichever core computed which chunk. A pass with an
        in-order fold is ONE chunk of n elements (`<pass>_ONE_CHUNK`)."""
        states = [st for k, agg in enumerate(self.aggs) for st in self._state(k, agg)]
        lines = ["span = n" if self.in_order else "span = CHUNK"]
        lines += ["for c in range(c0, c1):",
                  f"    r = {self.p.name}_chunk({self._a('c * span, min(n, c * span + span)')})"]
        lines += [f"    P_{name}[c] = r[{j}]" for j, (name, _, _) in enumerate(states)]
        lines += [f"{name} = {value}" for name, _, value in states]
        in_order = [f"    {line}" for k, agg in enumerate(self.aggs) if k not in self.float_sums
                    for line in self._combine(k, agg)]
        if in_order:
            lines += ["for c in range(nfin):", *in_order]
        lines += [f"s{k} = {self._pairwise_name(k)}(P_s{k}, nfin, s{k})" for k in self.float_sums]
        for k, agg in enumerate(self.aggs):
            lines += self._finish(k, agg)
        lines.append(f"return ({', '.join(self._result_names())},)")
        body = "".join(f"    {line}\n" for line in lines)
        partials = ", ".join(f"P_{name}" for name, _, _ in states)
        # `reassoc` lets LLVM vectorise a contiguous chunk loop, but a strided one differently
        # (other lane partial sums, other bits): with a float sum the caller passes contiguous
        # inputs (a strided one copied once), so the same values always add in the same order
        contiguous = any(a.op == "sum" and D.is_float(a.dtype) for a in self.aggs)
        consts = (f"{self.p.name}_PARTIALS = ({''.join(f'{T}, ' for _, T, _ in states)})\n"
                  f"{self.p.name}_ONE_CHUNK = {bool(self.in_order)}\n"
                  f"{self.p.name}_CONTIGUOUS = {contiguous}\n\n\n")
        return (f"{consts}{self.jits['entry']}\n"
                f"def {self.p.name}_chunks({self._a('c0, c1, nfin, n, ' + partials)}):\n"
                f'    """Chunks [c0, c1) of CHUNK elements into P_*, then the first nfin chunks\' '
                f'partials combined in chunk order."""\n'
                f"{body}").rstrip("\n")


def render_numba(mp) -> tuple[str, list[str]]:
    """(element function, kernels) of a Reduce pass for the module printer `mp`
    (dialects.numba_py): the element returns each agg's values (see
    ReducePrinter.element_returns), then the fold combines, chunk and entry functions."""
    reduce = ReducePrinter(mp.p, mp.element_name(), mp.args, mp.helpers, mp.jits)
    values = [v for agg in mp.p.terminal.aggs for v in agg.values]
    element_fn = mp.element(values, reduce.element_returns)
    return element_fn, reduce.render()
