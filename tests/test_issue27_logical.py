"""Issue 27 item 3: the logical plan and its optimizer (plan/logical.py, DESIGN.md section 5e).

Each pass is tested alone on a built plan (a pure function from plan to plan), then every
rewrite end to end against plain Python on the backends that run here."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import querycompute as qc
from querycompute.graph import graph as G
from querycompute.plan import logical as L
from querycompute.plan.plan import slot_info

BACKENDS = ["numpy", "cpu", "opencl"]


def table(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.integers(0, 7, n).astype(np.int32), "b": rng.integers(-50, 50, n).astype(np.int64),
            "c": rng.random(n).astype(np.float32), "d": rng.integers(0, 3, n).astype(np.int16)}


def plan_of(q, term=G.PLAIN["to_array"], fns=()):
    src = q._source
    infos = [slot_info(fn) for fn in G.slot_functions(q._ops, fns)]
    dts = tuple(str(c.dtype) for c in src.columns())
    return L.build(src.kind, tuple(src.fields), dts, q.nodes(), term, infos)


def kinds(plan):
    return [n.node.kind for n in plan.nodes]


def sum_of(q, f):
    return plan_of(q, G.WITH_FN["sum"], (f,))


# -- push_predicates --------------------------------------------------------------------
def test_where_moves_before_sorts_and_reverse():
    t = table()
    q = qc.query(t).order_by(lambda r: r.a).then_by(lambda r: r.b).reverse().where(lambda r: r.c > 0.5)
    p = L.push_predicates(plan_of(q))
    assert kinds(p) == ["where", "order_by", "then_by", "reverse"]
    assert [n.slot for n in p.nodes] == [3, 0, 1, 2]        # slots map back to the user's chain
    assert "before order_by, then_by, reverse" in p.notes[0]


@pytest.mark.parametrize("make", [
    lambda q: q.order_by(lambda r: r.a).take(3).where(lambda r: r.b > 0),
    lambda q: q.distinct(lambda r: r.a).where(lambda r: r.b > 0),
    lambda q: q.take_while(lambda r: r.b < 40).where(lambda r: r.b > 0),
    lambda q: q.select(lambda r: r.b).scan(lambda x, y: x + y, 0).where(lambda v: v > 0),
])
def test_where_stays_after_position_operators(make):
    p = plan_of(make(qc.query(table())))
    assert L.push_predicates(p) is p                         # nothing to do: the same plan


def test_a_where_between_a_sort_and_its_then_by_stays_where_it_is():
    # Query refuses to build this chain; the pass never makes an invalid chain valid either
    with pytest.raises(qc.QueryError, match="must follow order_by"):
        qc.query(table()).order_by(lambda r: r.a).where(lambda r: r.b > 0).then_by(lambda r: r.c)
    fns = (lambda r: r.a, lambda r: r.b > 0, lambda r: r.c)
    nodes = (G.OrderBy(fns[0]), G.Where(fns[1]), G.ThenBy(fns[2]))
    p = L.build("table", ("a", "b", "c"), ("int32",) * 3, nodes, G.PLAIN["to_array"],
                [slot_info(f) for f in fns])
    assert L.push_predicates(p) is p


def _joined(how="join", result=lambda a, b: {"x": a.b * 2, "y": b.v, "z": a.a + b.v}):
    o = {"k": np.arange(7, dtype=np.int32), "v": np.arange(7.0) * 0.5}
    return getattr(qc.query(table(40, 4)), how)(qc.query(o), lambda a: a.a, lambda b: b.k, result)


@pytest.mark.parametrize("how", ["join", "left_join"])
def test_a_where_over_this_sides_fields_moves_into_the_join(how):
    lim = 10
    q = _joined(how).where(lambda r: r.x > lim)
    p = L.push_predicates(plan_of(q))
    assert kinds(p)[:2] == ["where", how]
    assert p.nodes[0].src.text == "lambda a: a.b * 2 > lim"     # rewritten over this side's record
    assert p.chain_infos()[0][1]["lim"] == 10                    # its captures: the predicate's slot
    for b in BACKENDS:
        got = q.on(b).select(lambda r: r.y).to_array()
        t = table(40, 4)
        assert got.tolist() == [0.5 * a for a, x in zip(t["a"], t["b"]) if x * 2 > lim]


@pytest.mark.parametrize("pred", [
    lambda r: r.y > 1,                 # the other side's field
    lambda r: r.z > 1,                 # computed from both sides
    lambda r: r.x > 1 and r.y > 1,     # both
    lambda r: r.w > 1,                 # no such field: the lambda's own error, after the join
])
def test_a_where_that_reads_the_other_side_stays_after_the_join(pred):
    p = plan_of(_joined().where(pred))
    assert L.push_predicates(p) is p


def test_a_where_after_a_result_that_is_no_dict_literal_stays():
    p = plan_of(_joined(result=lambda a, b: (a.b, b.v)).where(lambda r: r[0] > 1))
    assert L.push_predicates(p) is p


# -- drop_sorted (properties) -----------------------------------------------------------
def test_a_sort_of_sorted_input_is_dropped():
    q = qc.query(table()).order_by(lambda r: r.a).where(lambda r: r.b > 0).order_by(lambda r: r.a)
    p = L.drop_sorted(plan_of(q))
    assert kinds(p) == ["order_by", "where"]
    assert "drop_sorted" in p.notes[0]
    # a prefix of the order is the order too: order_by(a).then_by(b) then order_by(a)
    q2 = qc.query(table()).order_by(lambda r: r.a).then_by(lambda r: r.b).take(5).order_by(lambda r: r.a)
    assert kinds(L.drop_sorted(plan_of(q2))) == ["order_by", "then_by", "take"]


@pytest.mark.parametrize("make", [
    lambda q, m: q.order_by(lambda r: r.a).order_by(lambda r: r.b),            # another key
    lambda q, m: q.order_by(lambda r: r.a).order_by_descending(lambda r: r.a), # another direction
    lambda q, m: q.order_by(lambda r: r.a % m).order_by(lambda r: r.a % m),    # captures: values may differ
    lambda q, m: q.order_by(lambda r: r.a).reverse().order_by(lambda r: r.a),  # reverse breaks the order
    lambda q, m: q.order_by(lambda r: r.a).select(lambda r: {"a": r.b}).order_by(lambda r: r.a),
    lambda q, m: q.order_by(lambda r: r.b).then_by(lambda r: r.a).order_by(lambda r: r.a),
    # the first key captures (its order unknown): its then_by's key alone is no order either
    lambda q, m: q.order_by(lambda r: r.b % m).then_by(lambda r: r.a).order_by(lambda r: r.a),
])
def test_a_sort_that_may_change_the_order_stays(make):
    p = plan_of(make(qc.query(table()), 3))
    assert L.drop_sorted(p).nodes == p.nodes


def test_a_distinct_of_distinct_input_is_dropped():
    q = qc.query(table()).distinct(lambda r: r.a).where(lambda r: r.b > 0).distinct(lambda r: r.a)
    assert kinds(L.drop_sorted(plan_of(q))) == ["distinct", "where"]
    q2 = qc.query(table()).distinct(lambda r: r.a).distinct(lambda r: r.b)
    assert kinds(L.drop_sorted(plan_of(q2))) == ["distinct", "distinct"]


# -- project ----------------------------------------------------------------------------
def test_a_sort_carries_only_the_fields_read_after_it():
    q = qc.query(table()).order_by(lambda r: r.a).where(lambda r: r.c > 0.1).take(4)
    p = L.project(sum_of(q, lambda r: r.b))
    assert p.nodes[0].carry == ("b", "c")                     # the key a is computed in the pass
    # the records themselves are the result: every field
    assert L.project(plan_of(q)).nodes[0].carry is None
    # a lambda that uses the record whole: every field
    q3 = qc.query(table()).order_by(lambda r: r.a).select(lambda r: r)
    assert L.project(plan_of(q3)).nodes[0].carry is None


def test_a_take_while_keeps_what_its_predicate_reads():
    q = qc.query(table()).take_while(lambda r: r.d < 2)
    p = L.project(sum_of(q, lambda r: r.b))
    assert p.nodes[0].carry == ("b", "d")


def test_a_joined_side_runs_with_the_fields_read_of_it():
    t, o = table(), {"k": np.arange(7, dtype=np.int32), "v": np.arange(7.0), "w": np.ones(7, np.int8),
                     "z": np.zeros(7, np.int64)}
    oq = qc.query(o).where(lambda x: x.z == 0)
    q = qc.query(t).join(oq, lambda a: a.a, lambda b: b.k, lambda a, b: {"s": a.b, "v": b.v})
    p = L.project(plan_of(q))
    other = [n for n in p.nodes if type(n.node) is G.JoinOther][0]
    assert other.other_fields == ("k", "v", "z")              # its key, the result's b.v, its where
    assert p.nodes[0].carry == ("b",)                         # this side: a.b only
    # the result uses b whole: the other side keeps every field
    q2 = qc.query(t).join(oq, lambda a: a.a, lambda b: b.k, lambda a, b: (a.b, b))
    assert [n for n in L.project(plan_of(q2)).nodes if type(n.node) is G.JoinOther][0].other_fields is None


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_joined_sides_result_holds_only_what_the_join_reads(backend):
    """What only the other side's own operators read (a where over a long string column) is
    not carried to the join: a select after them keeps its key and the result's fields, so a
    string column is never decoded, gathered or encoded again (TPC-H Q13: 7.7 s -> 0.5 s)."""
    o = {"k": np.array([1, 2, 2, 3], np.int32), "note": np.array(["x special", "ok", "special", "y"]),
         "v": np.arange(4.0)}
    oq = qc.query(o).where(lambda x: "special" not in x.note)
    q = qc.query(k=np.arange(5, dtype=np.int32)).on(backend).left_join(
        oq, lambda a: a.k, lambda b: b.k, lambda a, b: {"k": a.k, "has": qc.matched(b), "v": b.v})
    other = [n for n in L.project(plan_of(q)).nodes if type(n.node) is G.JoinOther][0]
    assert other.other_fields is None and other.other_out == ("k", "v")     # (it reads all three)
    assert "its result holding k, v" in q.explain()
    r = q.to_array()
    assert r["k"].tolist() == [0, 1, 2, 3, 4] and r["has"].tolist() == [False, False, True, True, False]
    assert r["v"][2:4].tolist() == [1.0, 3.0]


# -- pack_keys ---------------------------------------------------------------------------
@pytest.mark.parametrize("key,how", [
    (lambda r: r.a, "raw bits"),
    (lambda r: (r.a, r.d), "by its dtypes (48 bits)"),
    (lambda r: (r.b, r.a), "values' ranges"),
    (lambda r: (r.b, r.c), "numpy reference"),
])
def test_pack_keys_states_how_a_join_key_is_matched(key, how):
    o = {"k": np.arange(3, dtype=np.int64)}
    q = qc.query(table()).join(qc.query(o), key, lambda b: b.k, lambda a, b: a.b)
    p = L.pack_keys(plan_of(q))
    assert how in p.notes[0]


# -- share_subplans -----------------------------------------------------------------------
def test_a_query_joined_twice_runs_once():
    o = {"k": np.arange(7, dtype=np.int32), "v": np.arange(7.0), "w": np.arange(7, dtype=np.int64)}
    oq = qc.query(o)
    q = (qc.query(table()).join(oq, lambda a: a.a, lambda b: b.k, lambda a, b: {"x": a.d, "v": b.v})
         .join(oq, lambda r: r.x, lambda b: b.k, lambda a, b: a.v + b.w))
    p = L.share_subplans(L.project(plan_of(q)))
    others = [n for n in p.nodes if type(n.node) is G.JoinOther]
    assert others[1].share == others[0].slot
    assert others[0].other_fields == others[1].other_fields == ("k", "v", "w")   # the union
    for b in BACKENDS:
        got = q.on(b).to_array()
        a = table()
        want = [float(o["v"][x]) + float(o["w"][d]) for x, d in zip(a["a"], a["d"])]
        np.testing.assert_allclose(got, want)


def test_optimize_runs_the_passes_in_order():
    assert L.PASSES == (L.push_predicates, L.drop_sorted, L.project, L.pack_keys, L.share_subplans)
    q = qc.query(table()).order_by(lambda r: r.a).where(lambda r: r.c > 0.5).order_by(lambda r: r.a)
    p = L.optimize(sum_of(q, lambda r: r.b))
    # pushed first, then the second sort (now right after the first) is dropped
    assert kinds(p) == ["where", "order_by"]
    assert [x.split(":")[0] for x in p.notes] == ["push_predicates", "drop_sorted", "project"]


# -- end to end ---------------------------------------------------------------------------
def _rows(t):
    return [dict(zip(t, vals)) for vals in zip(*t.values())]


@pytest.mark.parametrize("backend", BACKENDS)
def test_rewritten_plans_give_plain_pythons_answers(backend):
    t = table(60, 1)
    rows = _rows(t)
    lim = 0.25
    q = qc.query(t).on(backend)
    # where pushed before the sort; the take then makes it a top-k
    got = q.order_by(lambda r: r.a).then_by(lambda r: r.b).where(lambda r: r.c > lim).take(5).sum(lambda r: r.b)
    srt = sorted(rows, key=lambda r: (r["a"], r["b"]))
    assert got == sum(int(r["b"]) for r in [r for r in srt if r["c"] > np.float32(lim)][:5])
    # a sort of sorted input dropped; the descending order kept
    got = q.order_by_descending(lambda r: r.b).where(lambda r: r.d != 1).order_by_descending(lambda r: r.b) \
        .select(lambda r: r.b).to_array()
    assert got.tolist() == sorted([int(r["b"]) for r in rows if r["d"] != 1], reverse=True)
    # reverse then where
    got = q.reverse().where(lambda r: r.a > 2).select(lambda r: r.b).to_array()
    assert got.tolist() == [int(r["b"]) for r in rows[::-1] if r["a"] > 2]
    # a distinct of distinct input
    got = q.distinct(lambda r: r.a).where(lambda r: r.b > -40).distinct(lambda r: r.a).select(lambda r: r.a).to_array()
    seen, want = set(), []
    for r in rows:
        if r["a"] not in seen:
            seen.add(r["a"])
            if r["b"] > -40:
                want.append(int(r["a"]))
    assert got.tolist() == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_pushed_predicates_bind_their_captured_values_per_call(backend):
    t = table(50, 2)
    rows = _rows(t)
    for lim, n in ((0.2, 3), (0.7, 6)):                 # new values: the same plan, new parameters
        got = qc.query(t).on(backend).order_by(lambda r: r.b).where(lambda r: r.c > lim).take(n) \
            .select(lambda r: r.b).to_array()
        want = [int(r["b"]) for r in sorted(rows, key=lambda r: r["b"]) if r["c"] > np.float32(lim)][:n]
        assert got.tolist() == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_projected_join_side_gives_the_same_rows(backend):
    t = table(30, 3)
    o = {"k": np.arange(7, dtype=np.int32), "v": np.arange(7.0) * 1.5, "w": np.arange(7, dtype=np.int64),
         "z": np.array([0, 1, 0, 1, 0, 1, 0], dtype=np.int8)}
    oq = qc.query(o).where(lambda x: x.z == 0)
    got = qc.query(t).on(backend).left_join(oq, lambda a: a.a, lambda b: b.k,
                                            lambda a, b: {"b": a.b, "v": b.v}).to_list()
    want = [{"b": int(b), "v": float(1.5 * a) if a % 2 == 0 else float("nan")} for a, b in zip(t["a"], t["b"])]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g["b"] == w["b"]
        assert (np.isnan(g["v"]) and np.isnan(w["v"])) or g["v"] == w["v"]


def test_explain_prints_the_optimized_plan():
    q = qc.query(table()).order_by(lambda r: r.a).where(lambda r: r.c > 0.5).take(3).select(lambda r: r.b)
    text = q.explain("cpu", "sum")
    assert "logical plan (optimized):" in text
    assert "moved before order_by (push_predicates)" in text
    assert "[carries b]" in text
    assert "top-k (no full sort)" in text                 # the take now follows the sort


_OPS = st.lists(st.sampled_from(["sort_a", "sort_b_desc", "where_c", "where_b", "reverse", "take", "distinct_a"]),
                min_size=1, max_size=5)


@settings(max_examples=25, deadline=None)
@given(ops=_OPS, seed=st.integers(0, 1000))
def test_optimized_chains_match_plain_python(ops, seed):
    t = table(25, seed)
    rows = _rows(t)
    q = qc.query(t).on("cpu")
    for op in ops:
        if op == "sort_a":
            q, rows = q.order_by(lambda r: r.a), sorted(rows, key=lambda r: r["a"])
        elif op == "sort_b_desc":
            q, rows = q.order_by_descending(lambda r: r.b), sorted(rows, key=lambda r: -r["b"])
        elif op == "where_c":
            q, rows = q.where(lambda r: r.c > 0.3), [r for r in rows if r["c"] > np.float32(0.3)]
        elif op == "where_b":
            q, rows = q.where(lambda r: r.b % 2 == 0), [r for r in rows if r["b"] % 2 == 0]
        elif op == "reverse":
            q, rows = q.reverse(), rows[::-1]
        elif op == "take":
            q, rows = q.take(7), rows[:7]
        else:
            seen, kept = set(), []
            for r in rows:
                if r["a"] not in seen:
                    seen.add(r["a"])
                    kept.append(r)
            q, rows = q.distinct(lambda r: r.a), kept
    assert q.select(lambda r: r.b).to_array().tolist() == [int(r["b"]) for r in rows]
