"""Planning `join(other, key, other_key, result)` and `left_join(...)` (DESIGN.md section 3).

    q.where(p).join(orders, lambda l: l.orderkey, lambda o: o.orderkey,
                    lambda l, o: {"qty": l.qty, "prio": o.prio}).where(...).group_by(...)

    stage 1: fused pass over this side: where p; this side's key and element -> columns
    stage 2: join: the other query's key and element columns (run as queries of their own on
             the same backend), the matching (this row, other row) index pairs in LINQ's
             order: this side's order, then the other side's order among the matches; both
             sides' element columns gathered by them
    stage 3: fused pass (the probe side's continuation): result(a, b), then whatever follows
             (where, select, terminal, group_by)

On a runtime with `caps.indexed_passes` (cpu) stages 2 and 3 are one: nothing is gathered, the
pass reads this side's columns at li[k] and the other side's at ri[k] (the pairs as index
columns: dialects/numba_indexed.py), and a group_by after it runs inside that pass too
(cpu_group_fused.py). `fusable` says where; other runtimes gather (same results). There,
too, stage 1 of `q.where(p).join(...)` over a table, a filter of source columns that
computes nothing of the element, runs as its `selects` variant (PassStage.selects) where
that is fewer bytes per survivor than the element's columns and keys: it stores
only the survivors' row numbers and keys, and li is mapped through those row numbers, so
the fused pass reads this side's source columns in place (TPC-H Q3's lineitem: 16 bytes
stored per survivor instead of 24, and its price and discount read for the matches only).

Key equality is that of sorting and distinct (order_keys.py: all NaNs one value, -0.0 == 0.0),
after both keys are converted to their common NumPy type. left_join keeps every row of this
side: a row without a match gets the other side's columns filled with NaN (floats), 0
(integers) or False (bools), its `b` fields reading those values. One more column follows
the other side's: `matched` (the other side's all-True column, gathered with the same fill:
False where nothing matched), which `b is None`, `b is not None` and `qc.matched(b)` read
(stage_kinds.element_of makes b a values.OuterSide).

`intersect_by(other, key, other_key)` / `except_by(...)` (a semi- / anti-join) plan as

    stage 1: fused pass over this side: its element and key -> columns
    stage 2: SemiJoinStage: the other query's key columns (run once, as a join's), then a
             membership flag per row of this side (StageRuntime.semi_join: the join's hash
             table on cpu and GPUs, semi_reference on numpy)
    stage 3: the next pass keeps the flagged rows in order (as after distinct; except_by:
             the unflagged, `not keep` in that pass)

so the other side's element columns are never read, duplicates in it never duplicate a row,
this side's duplicates are all kept, and the key equality is the join's.

The other side's element type is part of the plan: it is read from the other query when the
plan is made (its columns' dtypes and shape, by running it on zero rows); a run whose other
query gives different dtypes raises (it is a different plan).

The other side is a sub-plan, never a Query: this module builds it as a `graph.Chain` (the
user's chain over its source, narrowed by `projected`, a key select after it) and hands it to
the layer above to run: at plan time the planner's `sides` (its schema, on zero rows), at run
time the executor's (`StagedPrepared.sides_of(call)`: the sub-plan's kernels join the call's
trace rows). Both are the engine's `run(chain, terminal)`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends.gpu import device_columns as DC
from .._codegen.ops.join.reference import gather_filled
from ..errors import QueryError
from ..graph import graph as G
from ..graph.graph import CODED, PLAIN, Chain, Count
from .column_use import reads
from .fusion import leaves, string_leaves
from .plan import lower_query, slot_info
from ..frontend.datetimes import host_dtype, is_time_dtype, ticks_view
from .stage_kinds import Columns, Stage, plain_pass_after
from ..sources.sources import Source, from_args, plain_columns
from ..sources.string_columns import Encoded, codes_in, encode
from ..frontend.strings import CODE, JOINED, resolve_joined


@dataclass(frozen=True)
class KeyedByOther(Stage):
    """What a join and a semi-join stage hold of both sides' keys (this_side plans them)."""
    keys: tuple                    # this side's key columns (indexes)
    element: int                   # the first `element` columns are this side's element
    other_at: int                  # the plan parameter holding (other Query, its key function)
    key_dtypes: tuple              # the other side's key column dtypes, as planned
    semi = False                   # a semi-join: flags, no pairs

    def gpu_traffic(self, dialect: str, element_dtypes) -> list:
        from ..backends.gpu.gpu_join import explain_lines      # its kernels, bytes per row
        return explain_lines([element_dtypes[k] for k in self.keys], self.key_dtypes, dialect, semi=self.semi)


@dataclass(frozen=True)
class JoinStage(KeyedByOther):
    other: object                  # the other side's stages.Columns, as planned
    outer: bool                    # left_join
    other_fields: tuple | None = None   # the other side's fields it runs with (logical.project)
    strings: tuple = ()            # (other column, dictionary name) of its string columns
    dicts_at: int = -1             # the plan parameter holding this call's dictionaries
    string_keys: tuple = ()        # (key value, this side's dictionary) of string key values
    other_out: tuple | None = None  # the fields its result holds (logical.project), when fewer

    def run(self, ex, call, i: int, state: list, keep):
        """The join at run time (stage_kinds' protocol): the other side, the pairs, the gathers."""
        rt = ex.runtime
        if not rt.caps.device_join:          # GpuStages: a device join (gpu_join.py)
            state = [DC.to_host(c) for c in state]  # others: the join runs on the host
        return run_join(self, state, call, ex), keep, None

    def host_lines(self, runtime, element_dtypes) -> list:
        return runtime.describe_join([element_dtypes[k] for k in self.keys], self.key_dtypes, False) or []


def columns_of(value) -> tuple:
    """(shape, fields, columns) of a to_array() result: an array, a tuple or a dict of arrays."""
    if isinstance(value, dict):
        return "record", tuple(value), tuple(value.values())
    if isinstance(value, tuple):
        return "tuple", (), value
    return "scalar", (), (value,)


def this_side(planner, ops: list, at: int, fields=None, out=None) -> tuple:
    """This side's pass (`ops`, then the key of node `at`), and the other query's key dtypes
    (read by running it on zero rows): (element columns, key column indexes, key dtypes,
    the other Query over `fields` of its table: `projected`, the string key values: (value,
    this side's dictionary), matched as this side's codes: match_string_keys). The other
    side's node is bound as a plan parameter (read per call)."""
    mine: list = []
    skeys: list = []

    def key_leaves(lw, element):
        out = leaves(lw.apply(at, element))[2]
        skeys[:] = string_leaves(out)
        mine[:] = [host_dtype(s) for s in out]
        return out
    _, n_elem, key_cols, _ = planner.materialize(ops, key_leaves, forward=True,
                                                 select=planner.nodes[at].stage == "join")
    other, other_key = planner.infos[at + 1][1]["other"]
    other = projected(sub(other), fields, out)
    other._source.columns()            # (finds its element shapes: shaped ones can't be joined)
    if getattr(other._source, "shapes", None):
        from types import SimpleNamespace

        from ..sources.shaped import refuse_staged
        refuse_staged(other._source, (), SimpleNamespace(name=planner.nodes[at].kind))
    _, _, key_cols_other = columns_of(planner.sides(empty(keyed(other, other_key), "numpy"), TO_ARRAY))
    key_dtypes = tuple(str(c.dtype) for c in key_cols_other)
    theirs = [i for i, d in enumerate(key_dtypes) if d == "object"]    # decoded strings
    if theirs != [i for i, _ in skeys]:
        i = (set(theirs) ^ {i for i, _ in skeys}).pop()
        raise QueryError(f"{planner.nodes[at].kind}() key value {i} is a string on "
                         f"{'the other side' if i in theirs else 'this side'} only; a string key "
                         f"matches a string key (bring both to strings, or both to numbers)")
    key_dtypes = tuple(CODE if d == "object" else d for d in key_dtypes)   # matched as codes
    for a, b in zip(mine, key_dtypes):
        if a != b and (is_time_dtype(a) or is_time_dtype(b)):
            raise QueryError(f"{planner.nodes[at].kind}() keys are {a} on this side and {b} on the "
                             f"other: dates match in one unit; bring one key to the other's, e.g. "
                             f"lambda r: r.d + np.timedelta64(0, '{b[b.index('[') + 1:-1] if is_time_dtype(b) else 's'}')")
    if len(key_dtypes) != len(key_cols):
        kind = planner.nodes[at].kind
        raise QueryError(f"{kind}() keys differ in arity: this side's key has {len(key_cols)} "
                         f"value{'s' * (len(key_cols) != 1)}, the other's {len(key_dtypes)}; "
                         f"both key lambdas must return one value or tuples of the same length")
    planner.bindings.append((at + 1, "other", "object"))
    planner.limits.append(None)
    return n_elem, key_cols, key_dtypes, other, tuple(skeys)


def dictionaries_at(planner, needed: bool) -> int:
    """The plan parameter carrying this call's string dictionaries (appended when `needed`:
    a string key or the other side's strings), else -1."""
    if not needed:
        return -1
    planner.bindings.append(("dictionaries", "dictionaries", "object"))
    planner.limits.append(None)
    return len(planner.bindings) - 1


def match_string_keys(stage, right_keys, call) -> list:
    """The other side's string key columns (decoded strings) as codes of this side's
    dictionaries (-1: a string this side does not hold, which matches nothing)."""
    if not stage.string_keys:
        return right_keys
    dictionaries = call.params[stage.dicts_at]
    right_keys = list(right_keys)
    for i, column in stage.string_keys:
        right_keys[i] = codes_in(dictionaries[column], right_keys[i])
    return right_keys


def plan_join(planner, ops: list, at: int) -> None:
    """The Join node at `at` (this side's key), the JoinOther after it; appends this side's pass
    and the JoinStage to `planner`, whose columns then describe the (a, b) pair."""
    nodes = planner.nodes
    if at + 2 >= len(nodes) or type(nodes[at + 1]) is not G.JoinOther \
            or type(nodes[at + 2]) is not G.JoinResult:
        raise QueryError("a join is made by q.join(other, key, other_key, result)")
    node = planner.logical.nodes[at + 1] if planner.logical is not None else None
    runs_with, out = (node.other_fields, node.other_out) if node is not None else (None, None)
    n_elem, key_cols, key_dtypes, other, string_keys = this_side(planner, ops, at, runs_with, out)
    other_at = len(planner.bindings) - 1
    this = planner.cols
    shape, fields, cols = columns_of(planner.sides(empty(other, "numpy"), TO_ARRAY))
    outer = nodes[at].outer
    strings = _other_strings(planner, at, shape, fields, cols)
    dicts_at = dictionaries_at(planner, bool(strings or string_keys))
    other_cols = Columns(shape, fields, tuple(CODE if c.dtype == object else str(c.dtype) for c in cols),
                         strings)
    planner.stages.append(JoinStage(key_cols, n_elem, other_at, key_dtypes, other_cols, outer, runs_with,
                                    strings, dicts_at, string_keys, out))
    some = f" (its {len(fields)} fields read: {', '.join(fields)})" if fields is not None else ""
    planner.texts.append(f"{nodes[at].kind}: the other query's key and element columns{some}; matching row pairs "
                         f"(this side's order, then the other's); both sides gathered")
    # (a left join's unmatched rows hold NaN / 0 / False in the other side's own dtypes; its
    # matched column follows them)
    planner.cols = Columns("pair", (this, other_cols), this.dtypes + other_cols.dtypes + ("bool",) * outer)


def _other_strings(planner, at: int, shape: str, fields: tuple, cols: tuple) -> tuple:
    """The other side's string columns (decoded strings in its to_array: object columns):
    ((column, dictionary name), ...), which the join stage encodes into this call's
    dictionaries (encode_other_strings) and the results decode with. Each joined string
    column gets a dictionary of its own, named `<field>@join<at>` (the other side runs, and
    is encoded, once per call); a comparison with a string after the join is a parameter
    computed when it is encoded (strings.Deferred)."""
    at_cols = [i for i, c in enumerate(cols) if c.dtype == object]
    if not at_cols:
        return ()
    kind = planner.nodes[at].kind
    if shape != "record":
        raise QueryError(f"{kind}(): the other query's elements are a {shape} holding a string; "
                         f"a joined string column reaches the result from a record: select a "
                         f"dict in the other query, e.g. other.select(lambda c: {{'id': c.id, "
                         f"'name': c.name}}), and read b.name")
    name = fields.__getitem__
    return tuple((i, f"{name(i)}{JOINED}{at}") for i in at_cols)


def encode_other_strings(stage: JoinStage, right: list, call) -> list:
    """The other side's string columns (object arrays of str, its to_array's; or a table's
    Encoded columns as read: other_side) as int32 codes into sorted dictionaries, which go
    into this call's dictionaries under the stage's names (sources/string_columns.py's
    encoding: the results decode with them)."""
    if not stage.strings:
        return right
    dictionaries = call.params[stage.dicts_at]
    right = list(right)
    for i, name in stage.strings:
        enc = right[i] if type(right[i]) is Encoded else encode(right[i], f"joined string column {name!r}")
        right[i], dictionaries[name] = enc.codes, enc.dictionary
        if stage.outer and not (len(enc.dictionary) and enc.dictionary[0] is None):
            # a left join's unmatched rows get code 0 (the fill): None, first (a dictionary
            # that has it already, an earlier left join's, keeps its codes)
            right[i] = right[i] + np.int32(1)
            dictionaries[name] = np.concatenate([np.array([None], dtype=object), enc.dictionary])
    resolve_joined(call.params)     # comparisons with these columns after the join
    return right


@dataclass(frozen=True)
class SemiJoinStage(KeyedByOther):
    """intersect_by / except_by (module doc): keep flags of this side's rows."""
    anti: bool                     # except_by
    dicts_at: int = -1             # the plan parameter holding this call's dictionaries
    string_keys: tuple = ()        # (key value, this side's dictionary) of string key values
    column_op = True
    semi = True

    def run(self, ex, call, i: int, state: list, keep):
        """The other side's keys (its query run once), then StageRuntime.semi_join's flags;
        the next pass keeps the flagged rows (stages.py's `keep`, as after distinct)."""
        other, other_key = call.params[self.other_at]
        keys = other_key_columns(sub(other), other_key, ex.backend, ex.sides_of(call))
        right = [np.asarray(k) for k in match_string_keys(self, keys, call)]
        got = tuple(str(c.dtype) for c in right)
        right = [ticks_view(c) for c in right]
        if got != self.key_dtypes:
            raise QueryError(f"the other query's keys are {got}; the plan was made for {self.key_dtypes}: "
                             f"build the {'except_by' if self.anti else 'intersect_by'} again")
        flags = ex.runtime.semi_join([state[k] for k in self.keys], right, call.rows)
        return state[:self.element], flags, None      # except_by's pass keeps the unflagged

    def dtypes_after(self, current):
        return current if current is None else current[:self.element]

    def host_lines(self, runtime, element_dtypes) -> list:
        return runtime.describe_join([element_dtypes[k] for k in self.keys], self.key_dtypes, True) or \
            [f"{runtime.name}: the numpy reference (ops/join/reference.semi_reference: a sort of the "
             f"other side's key ids, binary searches), a flag per row"]


def plan_semi_join(planner, ops: list, at: int) -> None:
    """The SemiJoin node at `at` (this side's key), the JoinOther after it: this side's pass,
    then the SemiJoinStage; the next pass keeps the flagged rows (planner.keep)."""
    nodes = planner.nodes
    if at + 1 >= len(nodes) or type(nodes[at + 1]) is not G.JoinOther:
        raise QueryError(f"{nodes[at].kind}() is made by q.{nodes[at].kind}(other, key, other_key)")
    n_elem, key_cols, key_dtypes, _, string_keys = this_side(planner, ops, at)
    other_at = len(planner.bindings) - 1
    anti = nodes[at].anti
    planner.stages.append(SemiJoinStage(key_cols, n_elem, other_at, key_dtypes, anti,
                                        dictionaries_at(planner, bool(string_keys)), string_keys))
    planner.texts.append(f"{nodes[at].kind}: the other query's key columns (run once); a flag per row: whether "
                         f"its key occurs among them (the join's key equality); the next pass keeps the "
                         f"{'unflagged' if anti else 'flagged'} rows in order")
    planner.keep, planner.keep_not = True, anti


def fusable(stages: tuple, i: int) -> bool:
    """Whether stage i, a join, can hand its index pairs to the pass after it, which then
    reads both sides' columns through them (a runtime with `caps.indexed_passes` compiles that
    pass as dialects/numba_indexed.IndexedPass; nothing is gathered): that pass has no
    take/skip window, positional terminal or early exit (those slice their inputs)."""
    return plain_pass_after(stages, i, JoinStage) is not None


def indexed(stage: JoinStage, p):
    """The pass `p` after join `stage` reading the joined columns through the pairs."""
    from querycompute._codegen.dialects.numba_indexed import index
    return index(p, stage.element, len(stage.other.dtypes) + stage.outer, stage.outer)


def run_join(stage: JoinStage, state: list, call, ex) -> list:
    """The join stage at run time: the other side's columns, the index pairs, the gathers."""
    rows, rt = call.rows, ex.runtime
    left, right, li, ri = join_pairs(stage, state, call, ex)
    left = rt.gather(left, li, rows)
    if rt.caps.device_join:                  # GpuStages: the gathers stay on the device
        right = rt.gather_filled(right, ri, rows) if stage.outer else list(rt.gather(right, ri, rows))
    else:
        right = [gather_filled(np.asarray(c), ri) for c in right]
    return list(left) + right


def join_pairs(stage: JoinStage, state: list, call, ex, selected=None) -> tuple:
    """(this side's element columns, the other side's columns, li, ri): the join's matching
    row pairs (join_reference's order) and the columns they index, ungathered. `selected`:
    (the survivors' row numbers, their keys) of this side's pass run as its `selects`
    variant, `state` then this side's source columns as they are: li indexes those. The other
    side runs once per call (call.sides: a query joined at two joins of the plan serves
    both, logical.share_subplans), with only the fields the plan reads of it, run by the
    executor `ex` (its backend, its runtime, its `sides_of(call)`)."""
    backend, rt, sides = ex.backend, ex.runtime, ex.sides_of(call)
    other, other_key = call.params[stage.other_at]
    shared = (id(other), stage.other_fields, stage.other_out)
    got = call.sides.get(shared)
    if got is None or got[0] is not other:
        got = call.sides[shared] = (other, *other_side(projected(sub(other), stage.other_fields, stage.other_out),
                                                       backend, sides, other_key))
    _, right, key_side = got
    right = encode_other_strings(stage, right, call)
    right_keys = match_string_keys(stage, other_key_columns(key_side, other_key, backend, sides), call)
    got = (tuple(str(c.dtype) for c in right), tuple(str(c.dtype) for c in right_keys))
    if got != (stage.other.dtypes, stage.key_dtypes):
        raise QueryError(f"the joined query's columns are {got[0]} with keys {got[1]}; the plan was made "
                         f"for {stage.other.dtypes} with keys {stage.key_dtypes}: build the join again")
    left_keys = [state[k] for k in stage.keys] if selected is None else selected[1]
    li, ri = rt.join(left_keys, [ticks_view(np.asarray(k)) for k in right_keys], stage.outer, call.rows)
    if selected is not None:
        li = selected[0][li]           # survivor ranks -> source rows
    right = [ticks_view(np.asarray(c)) for c in right]
    if stage.outer:                    # the matched column: True, False where filled
        right.append(np.ones(len(right_keys[0]), dtype=bool))
    return list(state[:stage.element]), right, li, ri


def _in_place(other) -> bool:
    """Whether the other query is a table as it is: no operators, plain 1-D NumPy columns."""
    src = other._source
    return (not other._ops and src.kind in ("array", "zip", "table") and src._table is None
            and plain_columns(src._items))


TO_ARRAY = PLAIN["to_array"]


def sub(other, backend: str | None = None, source=None) -> Chain:
    """The user's other query (or a chain) as a sub-plan's chain: its operators over its
    source (or `source`), on its backend (or `backend`)."""
    return Chain(other._source if source is None else source, other._ops,
                 other._backend if backend is None else backend, other._kinds, other._codes)


def keyed(other: Chain, key) -> Chain:
    """`other`, then a select of its key function: the chain of its key columns."""
    return other._keyed(G.Select, key)


def empty(other: Chain, backend: str) -> Chain:
    """`other` on `backend`, cut to zero rows (take(0)): what the plan reads its schema from."""
    return sub(other, backend)._then(G.Take, Count(0), "count")


def projected(other: Chain, fields: tuple | None, out: tuple | None = None) -> Chain:
    """The other query over only `fields` of its table (logical.project: the fields its
    operators, its key and the join's result read), then, `out`, a select of the fields its
    key and the join's result read (what its operators alone read, such as a where's long
    string column, is not carried to the join: never decoded, gathered or encoded), or the
    query itself."""
    src = other._source
    if fields is not None and src.kind == "table" and not src.shapes and \
            tuple(src.fields) != tuple(fields) and set(fields) <= set(src.fields):
        if src._table is not None:
            narrow = src.narrow(tuple(fields))
        else:
            narrow = Source("table", tuple(src._items[src.fields.index(f)] for f in fields), tuple(fields))
        other = sub(other, source=narrow)
    if out is not None:
        other = other._keyed(G.Select, "lambda r: {" + ", ".join(f"{f!r}: r[{f!r}]" for f in out) + "}")
    return other


_SOURCE_KIND = {"scalar": "array", "tuple": "zip", "record": "table"}     # columns_of's shapes


def other_side(other: Chain, backend: str, sides, other_key=None) -> tuple:
    """(the other query's element columns, the query its key function runs over). A table
    joined as it is (_in_place) is read in place: the join and the pass after it only read
    them, so copying them (what its to_array does) would be wasted. Any other query runs once:
    its key is then computed over the columns it gave (a query over them, in place), not by
    running its operators a second time. Its string columns come back as this call's codes
    and dictionaries (Terminal.codes: never decoded to Python str and encoded again); the key
    query gets decoded strings of the fields `other_key` reads only."""
    if _in_place(other):
        return other._source._items, other
    src = other._source
    if not other._ops and src.kind == "table" and src._table is not None and src._table.strings \
            and not src.shapes:        # a table with strings, as it is: its columns as read,
        cols = list(src.columns())     # the strings as this call's codes and dictionaries
        if not any(src.times or ()):   # (never decoded and encoded again: encode_other_strings)
            for i, f in enumerate(src.fields):
                if f in src._table.strings:
                    cols[i] = Encoded(cols[i], src._table.dictionaries[f])
            return tuple(cols), other
    shape, fields, cols = columns_of(sides(sub(other, backend), CODED))
    coded = [type(c) is Encoded for c in cols]
    if shape == "record" and any(coded):
        keyed = reads(slot_info(other_key)[0], None) if other_key is not None else None
        table = {f: (c.dictionary[c.codes] if keyed is None or f in keyed else c.codes) if k else c
                 for f, c, k in zip(fields, cols, coded)}     # (strings its key reads: decoded)
        return cols, Chain(from_args((table,), {}), (), other._backend)
    if any(coded):                     # a string scalar / tuple element: decoded
        cols = tuple(c.dictionary[c.codes] if k else c for c, k in zip(cols, coded))
    return cols, Chain(Source(_SOURCE_KIND[shape], tuple(cols), fields), (), other._backend)


def other_key_columns(other: Chain, other_key, backend: str, sides) -> tuple:
    """The other query's key columns. Over a table joined as it is, a key that only picks
    its columns (`lambda o: o.id`, `lambda o: (o.a, o.b)`: the plan's element program
    computes and filters nothing, and loads each column in its own dtype) is those columns,
    in place; any other key runs as a query."""
    from querycompute._codegen.ir.expr import Load
    q = keyed(other, other_key)
    if _in_place(other):
        lw, cols, _ = lower_query(q, TO_ARRAY)
        prog = getattr(getattr(lw, "pass_", None), "program", None)
        items = other._source._items
        if prog is not None and not prog.body and not prog.has_filter and len(cols) == len(prog.inputs) \
                and all(type(o) is Load and o.dtype == prog.inputs[o.input].dtype
                        and any(cols[o.input] is c for c in items) for o in prog.outputs):
            return tuple(cols[o.input] for o in prog.outputs)
    return columns_of(sides(sub(q, backend), TO_ARRAY))[2]
