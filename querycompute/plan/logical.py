"""The logical plan and its optimizer (DESIGN.md section 5e).

Between the operation graph (a Query's chain of node objects, graph.py) and the stages
(stages.py cuts a chain into fused passes and column operations) sits the logical plan: one
`LNode` per operator, in chain order, each with its schema (the record fields flowing out of
it and their dtypes where the source or a pass-through fixes them) and its properties (the
keys its output is sorted by, the keys it is unique by). A join's node holds its other side's
plan, so the plan is a tree (two inputs at a join).

    q.where(p).order_by(k).where(r).take(5).join(o, kl, ko, res).sum(f)

    logical plan (optimized):                        (a sketch of explain()'s lines)
      source: table (12 fields)
      where p
      where r                    (moved before order_by (push_predicates))
      order_by k  [carries b, c, d]          (project: the sort gathers 3 columns, not 12)
      take n                     (the sort is now a top-k: the window follows it)
      join kl  [carries ...]
        other side: runs with 2 of 5 fields (k, v)
          source: table (5 fields)
      select res
      terminal sum

The optimizer is an ordered list of passes (PASSES, run by `optimize`), each a small pure
function from a LogicalPlan to a LogicalPlan that notes what it did (explain() prints the
notes), each with its own test (tests/test_issue27_logical.py):

    push_predicates   a where right after a join's result that reads only fields computed
                      from this side's record moves before the join, rewritten over that
                      record (fewer rows probe; a left join keeps every row of this side, so
                      the rows it drops are the same); a where right after sorts / reverse
                      moves before them: it sees the same
                      element, and a filter commutes with a stable sort and a reverse (the
                      survivors keep their relative order). Fewer rows are sorted, and a
                      take after the sort then follows it directly (a top-k, not a full sort).
                      Never past take/skip(_while), distinct, scan or a join (positions and
                      first occurrences change there).
    drop_sorted       properties: a sort whose input is already sorted by the same keys
                      (same key functions, same directions, no captured values) is the
                      identity of a stable sort and is dropped; a distinct whose input is
                      already unique by the same key likewise.
    project           projection pushdown: each breaker's pass stores only the record fields
                      read after it (a sort gathers, a join carries only those); a join's
                      other side runs with only the fields its own operators, its key and the
                      result function read.
    pack_keys         how each join key is matched, decided where its dtypes are known here
                      (source fields picked by the key): one 64-bit word by its dtypes, else
                      by its values' ranges (a min/max pass) or the numpy reference, which
                      the trace then names. Keys computed by a lambda are decided when the
                      pass is typed (cpu_join.reference_reason, printed per stage).
    share_subplans    common subplans once: a query joined twice in one plan (the same Query
                      object at two joins, e.g. a dimension table under two roles) runs once
                      per call; its columns serve both joins.

The planner (stages.py) plans the optimized chain; the optimized chain's slots are mapped
back to the user's (`slot_of`), so a call's captured values bind as before and a plan is
still made once per signature.
"""
from __future__ import annotations

import ast
from copy import deepcopy as _copy
from dataclasses import dataclass, replace

import numpy as np

from ..graph import graph as G
from .column_use import fields_read, reads
from .plan import NO_FUNCTION, slot_info


@dataclass(frozen=True)
class LNode:
    """One operator of the logical plan. `slot`: its index in the user's chain (where its
    function's captured values are found); `fields`/`dtypes`: the schema of its output (a
    record's fields, None when the element is not a record or a lambda computes it);
    `sorted_by` / `unique_by`: key identities (`key_id`) of its output's order / uniqueness;
    `carry`: the fields its stage stores (None: all); `other`: a join's other side."""
    node: object
    slot: int
    text: str
    fields: tuple | None = None
    dtypes: tuple = ()
    sorted_by: tuple = ()
    unique_by: tuple = ()
    carry: tuple | None = None
    other: "LogicalPlan | None" = None
    other_fields: tuple | None = None   # a join: the other side's fields it runs with
    other_out: tuple | None = None      # ... and those its result holds (its own operators'
    #                                     reads dropped after them), when fewer
    src: object = None                  # a function a pass rewrote (its captures: its slot's)
    share: int = -1                     # a join: the slot of an earlier join with the same other query
    note: str = ""


@dataclass(frozen=True)
class LogicalPlan:
    source_kind: str
    fields: tuple                      # the source's record fields (a table), else ()
    dtypes: tuple                      # the source's column dtypes
    nodes: tuple                       # LNode per operator, optimized order
    term: object                       # the graph Terminal
    infos: tuple                       # (LambdaSource, captured values) per user slot
    notes: tuple = ()                  # what each pass did, in pass order
    n_user: int = 0                    # operators in the user's chain

    def slot_of(self, s: int) -> int:
        """The user's slot for slot `s` of the optimized chain (terminal slots follow)."""
        if s < len(self.nodes):
            return self.nodes[s].slot
        return s - len(self.nodes) + self.n_user

    def chain(self) -> tuple:
        return tuple(n.node for n in self.nodes)

    def chain_infos(self) -> list:
        """The infos in the optimized chain's slot order (the terminal's after)."""
        return [(n.src, self.infos[n.slot][1]) if n.src is not None else self.infos[n.slot]
                for n in self.nodes] + list(self.infos[self.n_user:])

    def text(self) -> list[str]:
        """explain()'s lines for the optimized plan (indented by depth)."""
        return _lines(self, "  ")


# -- building -----------------------------------------------------------------------------
def key_id(node, src) -> tuple | None:
    """A sort / distinct key's identity, comparable across operators: its code (parameters
    and body) and, for a sort, its direction. None when it captures values (two closures of
    the same text may capture different values) or it is no lambda."""
    if src is NO_FUNCTION:
        body = ("element",)
    elif src.body is None or src.captures or src.stmts:
        return None
    else:
        body = (src.params, ast.dump(src.body))
    return (getattr(node, "descending", False),) + body


def build(source_kind: str, fields: tuple, dtypes: tuple, nodes: tuple, term, infos) -> LogicalPlan:
    """The logical plan of a chain, unoptimized (schemas and properties filled in)."""
    out, cur_fields, cur_dtypes = [], (tuple(fields) if source_kind == "table" else None), tuple(dtypes)
    sorted_by, unique_by = (), ()
    for i, node in enumerate(nodes):
        src = infos[i][0]
        other = None
        if node.makes_element:
            cur_fields, cur_dtypes = _made_fields(src), ()
            sorted_by = unique_by = ()
        elif node.sorts:
            k = key_id(node, src)        # a then_by refines its sort's order, if that one is known
            if node.then:
                sorted_by = sorted_by + (k,) if sorted_by and k is not None else ()
            else:
                sorted_by = (k,) if k is not None else ()
        elif node.stage == "reverse":
            sorted_by = ()
        elif node.stage == "distinct":
            k = key_id(node, src)
            unique_by = (k,) if k is not None else ()
        elif node.stage == "group":
            sorted_by = unique_by = ()
        elif type(node) is G.JoinOther:
            other = _other_plan(infos[i][1]["other"][0])
        out.append(LNode(node, i, src.text, cur_fields, cur_dtypes, sorted_by, unique_by, other=other))
    return LogicalPlan(source_kind, tuple(fields), tuple(dtypes), tuple(out), term, tuple(infos),
                       n_user=len(nodes))


def _made_fields(src) -> tuple | None:
    """The fields of a record a lambda builds as a dict literal of constant names."""
    body = src.body
    if isinstance(body, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                          for k in body.keys):
        return tuple(k.value for k in body.keys)
    return None


def _other_plan(other) -> LogicalPlan:
    """The other side of a join, planned like a chain of its own (for its schema and explain)."""
    src = other._source
    nodes = other.nodes()
    infos = [slot_info(fn) for fn in other._ops]
    fields = tuple(src.fields) if src.kind == "table" else ()
    return build(src.kind, fields, (), nodes, None, infos)


# -- the passes ---------------------------------------------------------------------------
def push_predicates(plan: LogicalPlan) -> LogicalPlan:
    """A where right after a join's result that reads only this side's fields moves before
    the join (rewritten over this side's record); a where right after a run of sorts /
    reverses moves before the run."""
    nodes = list(plan.nodes)
    moved = []
    for i in range(3, len(nodes)):
        n = nodes[i]
        if type(n.node) is G.Where and type(nodes[i - 1].node) is G.JoinResult:
            src = _over_this_side(plan.infos[n.slot][0], plan.infos[nodes[i - 1].slot][0])
            if src is not None:
                join = nodes[i - 3]
                pushed = replace(n, node=G.Where(n.node.fn), src=src, text=src.text, fields=join.fields,
                                 dtypes=join.dtypes, note="pushed into the join's side from after it (push_predicates)")
                nodes[i - 3:i + 1] = [pushed] + nodes[i - 3:i]
                moved.append(f"where {n.text} into {join.node.kind}'s side")
    i = 0
    while i < len(nodes):
        n = nodes[i]
        # (a where before a then_by is an error the planner reports: it stays where it is)
        if type(n.node) is G.Where and not (i + 1 < len(nodes) and nodes[i + 1].node.then):
            j = i
            while j > 0 and _commutes(nodes[j - 1].node):
                j -= 1
            if j < i:
                over = ", ".join(m.node.kind for m in nodes[j:i])
                nodes[j:i + 1] = [replace(n, note=f"moved before {over} (push_predicates)")] + nodes[j:i]
                moved.append(f"where {n.text} before {over}")
        i += 1
    if not moved:
        return plan
    return _renote(replace(plan, nodes=tuple(nodes)), "push_predicates: " + "; ".join(moved))


def _over_this_side(pred, result):
    """`pred` (lambda r: ... r.x ...) over the fields of a join's result (lambda a, b: {"x":
    a.q * 2, ...}) rewritten over this side's record (lambda a: ... a.q * 2 ...), when every
    field it reads is computed from `a` alone (names other than a, like captured values,
    make it stay: the new function's captures are the predicate's own); else None."""
    body = result.body
    if (len(result.params) != 2 or not isinstance(body, ast.Dict) or len(pred.params) != 1
            or pred.stmts or result.stmts or pred.body is None):
        return None
    a, r = result.params[0], pred.params[0]
    fields = {}
    for k, v in zip(body.keys, body.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            return None
        if all(x.id == a for x in ast.walk(v) if isinstance(x, ast.Name)) and \
                not any(isinstance(x, (ast.Call, ast.Lambda)) for x in ast.walk(v)):
            fields[k.value] = v
    if a in pred.captures:
        return None

    class Sub(ast.NodeTransformer):
        ok = True

        def visit_Attribute(self, node):
            if isinstance(node.value, ast.Name) and node.value.id == r:
                if node.attr in fields:
                    return ast.copy_location(_copy(fields[node.attr]), node)
                self.ok = False
            return self.generic_visit(node)

        def visit_Subscript(self, node):
            if isinstance(node.value, ast.Name) and node.value.id == r:
                key = node.slice.value if isinstance(node.slice, ast.Constant) else None
                if key in fields:
                    return ast.copy_location(_copy(fields[key]), node)
                self.ok = False
            return self.generic_visit(node)

        def visit_Name(self, node):
            if node.id == r:             # the record used some other way
                self.ok = False
            return node
    sub = Sub()
    new = sub.visit(_copy(pred.body))
    if not sub.ok:
        return None
    ast.fix_missing_locations(new)
    return type(pred)(params=(a,), body=new, filename=pred.filename, captures=pred.captures,
                      code=None, text=f"lambda {a}: {ast.unparse(new)}")


def _commutes(node) -> bool:
    """Whether a filter after `node` gives the same rows before it."""
    return bool(node.sorts) or node.stage == "reverse"


def drop_sorted(plan: LogicalPlan) -> LogicalPlan:
    """A sort (order_by + its then_bys) whose input is already sorted by its keys, or a
    distinct whose input is already unique by its key, is dropped."""
    plan = _reprops(plan)
    nodes, out, dropped = plan.nodes, [], []
    i = 0
    while i < len(nodes):
        n = nodes[i]
        before = out[-1] if out else None
        if n.node.sorts and not n.node.then:
            j = i + 1
            while j < len(nodes) and nodes[j].node.then:
                j += 1
            keys = nodes[j - 1].sorted_by
            have = before.sorted_by if before is not None else ()
            if keys and len(keys) == j - i and have[:len(keys)] == keys:
                dropped.append(" + ".join(f"{m.node.kind} {m.text}" for m in nodes[i:j]))
                i = j
                continue
        if n.node.stage == "distinct" and before is not None and n.unique_by and before.unique_by == n.unique_by:
            dropped.append(f"distinct {n.text}")
            i += 1
            continue
        out.append(n)
        i += 1
    if not dropped:
        return plan
    return _renote(replace(plan, nodes=tuple(out)),
                   "drop_sorted: " + "; ".join(f"{d} (its input is already so)" for d in dropped))


def _reprops(plan: LogicalPlan) -> LogicalPlan:
    """Properties recomputed over the (possibly reordered) chain."""
    fresh = build(plan.source_kind, plan.fields, plan.dtypes, plan.chain(), plan.term, plan.chain_infos())
    nodes = tuple(replace(n, sorted_by=f.sorted_by, unique_by=f.unique_by, fields=f.fields, dtypes=f.dtypes)
                  for n, f in zip(plan.nodes, fresh.nodes))
    return replace(plan, nodes=nodes)


def project(plan: LogicalPlan) -> LogicalPlan:
    """Each breaker's stage carries only the record fields read after it; a join's other
    side runs with only the fields read of it."""
    infos = plan.chain_infos()
    term_steps = _term_steps(plan.term, infos, len(plan.nodes))
    nodes, notes = list(plan.nodes), []
    for i, n in enumerate(nodes):
        if n.node.breaks_stage and n.fields is not None and n.node.stage != "group":
            # what is read after the stage: the later operators (a sort's then_bys and a
            # breaker's own key are computed in the pass before it), and a take_while's own
            # predicate (it reads the stored columns)
            after = [(m.node, infos[k][0]) for k, m in enumerate(nodes)
                     if (k > i and not m.node.then) or (k == i and m.node.stage == "take_while")]
            names = fields_read(after, plan.term.name, term_steps)
            if names is not None and set(names) <= set(n.fields) and len(names) < len(n.fields):
                carry = tuple(f for f in n.fields if f in names) or n.fields[:1]
                nodes[i] = replace(n, carry=carry)
                notes.append(f"{n.node.kind} carries {len(carry)} of {len(n.fields)} fields")
        if _joined(nodes, i) and n.other is not None and n.other.source_kind == "table":
            got = _other_fields(n.other, infos, i)
            if got is not None and len(got) < len(n.other.fields):
                nodes[i] = replace(nodes[i], other_fields=got)
                notes.append(f"the joined side runs with {len(got)} of {len(n.other.fields)} fields")
            out = _other_out(n.other, infos, i) if got is not None else None
            if out is not None and len(out) < len(got):
                nodes[i] = replace(nodes[i], other_out=out)
                notes.append(f"its result holds {len(out)} of them")
    if not notes:
        return plan
    return _renote(replace(plan, nodes=tuple(nodes)), "project: " + "; ".join(notes))


def _joined(nodes: list, i: int) -> bool:
    """Whether node i is a join's other side (a semi-join's reads only its keys: its own
    query, by column pruning, and shares nothing)."""
    return type(nodes[i].node) is G.JoinOther and nodes[i - 1].node.stage == "join"


def _other_fields(other: LogicalPlan, infos: list, at: int) -> tuple | None:
    """The fields of a join's other side that its own operators, its key (infos[at]: the
    JoinArg) and the join's result function (slot at + 1, its second parameter) read, in
    table order; None when its element is not its source's record or may be used whole."""
    if any(m.node.makes_element for m in other.nodes):
        return None
    steps = [(m.node, other.infos[m.slot][0]) for m in other.nodes]
    names = fields_read(steps, "agg", ())
    key = infos[at][1]["other"][1]
    key_reads = reads(slot_info(key)[0], None)
    res = reads(infos[at + 1][0], 1) if at + 1 < len(infos) else None
    if names is None or key_reads is None or res is None:
        return None
    names = set(names) | key_reads | res
    if not names <= set(other.fields):
        return None                      # a name that is no field: the lambda's own error
    return tuple(f for f in other.fields if f in names) or other.fields[:1]


def _other_out(other: LogicalPlan, infos: list, at: int) -> tuple | None:
    """The fields of a join's other side that its key and the join's result read (those its
    own operators read end with them: a where's string column is not carried to the join),
    in table order; None when its operators are none or may make a new element."""
    if not other.nodes or any(m.node.makes_element for m in other.nodes):
        return None
    key_reads = reads(slot_info(infos[at][1]["other"][1])[0], None)
    res = reads(infos[at + 1][0], 1) if at + 1 < len(infos) else None
    if key_reads is None or res is None:
        return None
    names = key_reads | res
    return tuple(f for f in other.fields if f in names) or other.fields[:1]


def _term_steps(term, infos: list, first: int) -> list:
    out, s = [], first
    for _, spec in term.specs:
        if spec.fn is None:
            out.append((spec.kind, None))
            continue
        src = infos[s][0]
        out.append((spec.kind, None if src.filename == "<count>" else src))
        s += 1
    return out


def pack_keys(plan: LogicalPlan) -> LogicalPlan:
    """A join key that picks source fields of known dtypes: how the cpu hash join matches
    it (one word by dtypes, by value ranges or the numpy reference); noted for explain()."""
    notes = []
    for i, n in enumerate(plan.nodes):
        if not (getattr(n.node, "stage", None) == "join" and n.dtypes and n.fields):
            continue
        picked = _picked_fields(plan.infos[n.slot][0])
        if not picked or not set(picked) <= set(n.fields):
            continue
        dts = [n.dtypes[n.fields.index(f)] for f in picked]
        bits = 8 * sum(np.dtype(d).itemsize for d in dts)
        if len(picked) == 1:
            how = "its raw bits"
        elif bits <= 64:
            how = f"one 64-bit word by its dtypes ({bits} bits)"
        elif all(np.dtype(d).kind in "biu" for d in dts):
            how = "one 64-bit word by its values' ranges (a min/max pass), else the numpy reference (traced)"
        else:
            how = "the numpy reference (a float field in a key wider than 64 bits)"
        notes.append(f"{n.node.kind} key ({', '.join(picked)}): {how}")
    if not notes:
        return plan
    return _renote(plan, "pack_keys: " + "; ".join(notes))


def _picked_fields(src) -> tuple | None:
    """The fields a key lambda picks as they are: r.a or (r.a, r.b)."""
    body = src.body
    parts = body.elts if isinstance(body, ast.Tuple) else [body]
    if len(src.params) != 1 or not all(isinstance(p, ast.Attribute) and isinstance(p.value, ast.Name)
                                       and p.value.id == src.params[0] for p in parts):
        return None
    return tuple(p.attr for p in parts)


def share_subplans(plan: LogicalPlan) -> LogicalPlan:
    """A query joined at two joins of one plan runs once per call (the later join reads the
    earlier one's columns; its projection is the union of both)."""
    nodes, seen, notes = list(plan.nodes), {}, []
    for i, n in enumerate(nodes):
        if not _joined(nodes, i):
            continue
        other = plan.infos[n.slot][1]["other"][0]
        first = seen.get(id(other))
        if first is None:
            seen[id(other)] = i
            continue
        a, b = nodes[first], n
        union = None if a.other_fields is None or b.other_fields is None else \
            tuple(f for f in a.other.fields if f in set(a.other_fields) | set(b.other_fields))
        outs = None if union is None or a.other_out is None or b.other_out is None else \
            tuple(f for f in a.other.fields if f in set(a.other_out) | set(b.other_out))
        nodes[first] = replace(a, other_fields=union, other_out=outs)
        nodes[i] = replace(b, other_fields=union, other_out=outs, share=a.slot)
        notes.append(f"the query joined at {a.node.kind} #{first} and #{i} runs once")
    if not notes:
        return plan
    return _renote(replace(plan, nodes=tuple(nodes)), "share_subplans: " + "; ".join(notes))


def _renote(plan: LogicalPlan, note: str) -> LogicalPlan:
    return replace(plan, notes=plan.notes + (note,))


# The optimizer: its passes, in order (numba's pass pipeline, DuckDB's optimizer list).
PASSES = (push_predicates, drop_sorted, project, pack_keys, share_subplans)


def optimize(plan: LogicalPlan, passes=None) -> LogicalPlan:
    """`plan` rewritten by `passes` (by default PASSES, read at each call: a benchmark may
    set it to () to plan without the optimizer, benchmarks/optimizer.py)."""
    for p in PASSES if passes is None else passes:
        plan = p(plan)
    return plan


# -- explain ------------------------------------------------------------------------------
def _lines(plan: LogicalPlan, pad: str) -> list[str]:
    if plan.source_kind == "table":
        head = f"{pad}source: table ({len(plan.fields)} fields)"
    else:
        head = f"{pad}source: {plan.source_kind}"
    out = [head]
    for n in plan.nodes:
        if type(n.node) is G.JoinOther:
            what = f"{pad}  other side:"
            if n.other_fields is not None:
                what += f" runs with {len(n.other_fields)} of {len(n.other.fields)} fields ({', '.join(n.other_fields)})"
            if n.other_out is not None:
                what += f", its result holding {', '.join(n.other_out)}"
            if n.share >= 0:
                what += " (the same query as an earlier join: run once)"
            out.append(what)
            if n.other is not None:
                out += _lines(n.other, pad + "    ")
            continue
        line = f"{pad}{n.node.kind} {n.text}".rstrip()
        if n.carry is not None:
            line += f"  [carries {', '.join(n.carry)}]"
        if n.note:
            line += f"  ({n.note})"
        out.append(line)
    if plan.term is not None:
        out.append(f"{pad}terminal {plan.term.name}")
    return out
