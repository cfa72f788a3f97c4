"""Which columns of a table a query reads, so only those are converted and handed to the kernel.

A DataFrame / Arrow table source (sources.Source with a Table) offers every column a kernel
can read; a query usually reads a few. Before a run, `narrowed(q, term, fns)` looks at the
lambdas that see the source's record and keeps the columns they name (`r.price`,
`r["price"]`), so a wide table costs only the columns the query uses (no conversion, no
device copy of the others) and a column that is not read can't fail the query (a null
appearing in it later, for instance).

The record reaches a lambda through the operators that keep elements as they are (where,
order_by / then_by keys, take/skip(_while), distinct, reverse, join and group_by keys) up to
the first operator that makes new elements (select, scan, a join's result); if none does, the
terminal's functions see it too. Whenever the record itself may flow on, all readable columns
are kept (a conservative answer is always correct): a lambda seeing the record uses a
parameter other than through `.name` / `["name"]`, or unpacks it into several parameters (an
unpack follows the column order), or the terminal returns elements (to_array, first, last,
...), or an aggregate has no function. The reads of a lambda are computed once per
LambdaSource (that is, per code object).
"""
from __future__ import annotations

import ast

from ..artifacts import ArtifactCache
from ..errors import QueryError
from ..graph import terminals as T
from ..graph.graph import Count
from .plan import slot_info

# Aggregate kinds whose result never contains the element when they have no function.
_NO_FN_NO_READ = frozenset(("count",))
# Which parameter of a terminal's function holds the record: a fold's last (func(acc, v));
# None: the lambda's only parameter (several: an unpacked record). An operator's node class
# says it for its own function (Op.record_param).
_RECORD_PARAM = {"fold": -1}
_READS = ArtifactCache("plan: fields a lambda reads", 4096)  # (id(LambdaSource), param) -> (src, reads)


def narrowed(q, term, fns):
    """`q`, or a copy of it over a Source narrowed to the columns its lambdas read."""
    src = q._source
    fields = used_fields(src.fields, q._kinds, q._ops, term, fns)
    if fields is None and src.skipped and returns_records(q._kinds, term):
        refuse_unreadable(src.skipped)
    if fields is None or len(fields) == len(src.fields):
        return q
    return type(q)(src.narrow(fields), q._ops, q._backend, q._kinds, q._codes)


def used_fields(fields: tuple, kinds: tuple, ops: tuple, term, fns) -> tuple | None:
    """The table columns (in table order) the query reads, or None for all of them."""
    # (generators: fields_read stops at the first operator that makes a new element, so the
    # functions after it are never looked at; this runs on every call over a DataFrame)
    steps = ((cls, None if fn is None else slot_info(fn)[0]) for cls, fn in zip(kinds, ops))
    names = fields_read(steps, term.name, _term_steps(term, fns))
    return None if names is None else _in_order(fields, names)


# Terminals that return the elements themselves (when not aggregates inside agg())
_RETURNS_ELEMENTS = frozenset(("to_array", "to_list", "first", "last", "single", "element_at"))


def returns_records(kinds: tuple, term) -> bool:
    """Whether the result holds the source's records themselves: no operator makes new
    elements and the terminal returns elements."""
    if any(cls.makes_element for cls in kinds):
        return False
    return term.name in _RETURNS_ELEMENTS or (
        term.name != "agg" and any(kind in _RETURNS_ELEMENTS for kind, _ in term.specs))


def refuse_unreadable(skipped: dict):
    """A result of whole records over a table with columns no kernel can read: naming them,
    never leaving them out of the result silently."""
    why = "; ".join(f"{name!r}: {reason}" for name, reason in skipped.items())
    raise QueryError(f"the result holds the table's whole records, but the table has columns a "
                     f"kernel can't read ({why}); they would be missing from it. Select the "
                     f"fields you want (.select(lambda r: {{'a': r.a, ...}})), or convert or "
                     f"drop those columns before qc.query(...)")


def _term_steps(term, fns):
    per_call = iter(fns)
    for _, spec in term.specs:
        fn = spec.fn
        if fn is T.PER_CALL:
            fn = next(per_call, None)
        yield spec.kind, None if fn is None or type(fn) is Count else slot_info(fn)[0]


def fields_read(steps, term_name: str, term_steps) -> set | None:
    """The record fields read by a chain's operators and its terminal, or None when the
    record may be used whole. `steps`: (node class, LambdaSource or None) per operator, from
    the point where the record enters; `term_steps`: (aggregate kind, LambdaSource or None)
    per terminal spec (None for a Count or no function). Shared by the source's column
    pruning (used_fields) and the planner's projection pushdown (logical.py)."""
    names: set = set()
    for node, src in steps:
        if node.other_side:                     # the other query of a join: its own source
            continue
        if src is None:
            if node.element_key:
                return None                     # the element itself is the key
            continue
        if not _add(names, src, node.record_param):
            return None
        if node.makes_element:                  # later operators read the new element
            return names
    if term_name in ("to_array", "to_list"):
        return None                             # the records themselves are the result
    for kind, src in term_steps:
        if src is None:
            if kind not in _NO_FN_NO_READ:
                return None                     # the element itself is aggregated or returned
            continue
        if kind in ("last", "single", "element_at", "first") and term_name != "agg":
            return None                         # returns the element the predicate picked
        if not _add(names, src, _RECORD_PARAM.get(kind)):
            return None
    return names


def _in_order(fields: tuple, names: set) -> tuple | None:
    """The fields named, in table order; at least one (the length comes from a column).
    None (all of them) when a name is no readable column: the lambda's "no field" error
    then lists the table's columns, not just the ones read."""
    if not names <= set(fields):
        return None
    return tuple(f for f in fields if f in names) or fields[:1]


def _add(names: set, src, record_param: int | None) -> bool:
    """Add the fields `src` (a LambdaSource) reads from the record; False when it may use
    the record whole."""
    key = (id(src), record_param)
    hit = _READS.get(key)
    if hit is None or hit[0] is not src:
        hit = _READS.put(key, (src, _reads(src, record_param)))
    if hit[1] is None:
        return False
    names.update(hit[1])
    return True


def reads(src, record_param: int | None) -> frozenset | None:
    """The fields lambda `src` reads from its record parameter (cached per code object)."""
    names: set = set()
    return frozenset(names) if _add(names, src, record_param) else None


def _reads(src, record_param: int | None) -> frozenset | None:
    """Names read as r.name / r["name"] from the record parameter, or None if it is used any
    other way (passed on, returned, compared whole...) or unpacked into several parameters."""
    if src.body is None or not src.params:
        return frozenset()
    if record_param is None:
        if len(src.params) > 1:
            return None                         # the record unpacked in column order
        params = set(src.params)
    else:
        params = {src.params[record_param]}
    out: set = set()
    parents = {}
    for node in ast.walk(src.body):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(src.body):
        if not (isinstance(node, ast.Name) and node.id in params):
            continue
        up = parents.get(node)
        if isinstance(up, ast.Attribute) and up.value is node:
            out.add(up.attr)
        elif (isinstance(up, ast.Subscript) and up.value is node and isinstance(up.slice, ast.Constant)
              and isinstance(up.slice.value, str)):
            out.add(up.slice.value)
        elif not _tests_match(up, node):
            return None
    return frozenset(out)


def _tests_match(up, node) -> bool:
    """`qc.matched(b)`, `b is None`, `b is not None`: a left join's matched test reads no
    field of b (the translator checks that it is qc's matched)."""
    if isinstance(up, ast.Call) and up.args == [node] and not up.keywords:
        f = up.func
        return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) == "matched"
    return (isinstance(up, ast.Compare) and len(up.ops) == 1 and isinstance(up.ops[0], (ast.Is, ast.IsNot))
            and up.left is node and isinstance(up.comparators[0], ast.Constant)
            and up.comparators[0].value is None)
