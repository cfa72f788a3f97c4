"""numba kernels of the cpu group_by (cpu_group.py): group ids of a low-cardinality key and
the run starts of a sorted key. The aggregates themselves are generated per GroupSpec
(ops/group/cpu.py).

This text is never imported by querycompute: cpu_group.py appends it to
ops/sort/cpu_kernels.py's text (it uses order_bits, CHUNK and _GOLDEN from there, so the key
order has one home) and loads the whole through the cpu backend's disk cache.

Group ids (group_local_ids by morsels, then group_merge_ids once): each key is one exact
  uint64 word (its order bits, or several keys' bits packed by the stage kernels' `pack`).
  Chunks are CHUNK rows whatever the thread count.
  1. per chunk (chunks in parallel): an open-addressing table of at most `limit` words gives
     each row a LOCAL id (the chunk's groups numbered in order of first appearance, uint16) and
     records per local group its word, first row and row count; a chunk with more than
     `limit` distinct words gives up (-1).
  2. serial merge, chunks in order and each chunk's groups in local order: a global table
     numbers the groups in order of first appearance (the first row of a group is its
     first row in the first chunk it appears in: its first row in source order); counts
     add up; more than `limit` groups gives up.
  3. the groups sorted by word (= ascending key order, NaN last) and `remap[c, j]` = the
     sorted position of chunk c's local group j.
  Everything is an exact integer: no order or thread count can change the result.
Run starts (breaks_chunks): new[i] |= order bits of u[i] != those of u[i-1], over keys
  already in sorted order (one key column at a time); sorted_breaks_chunks: the same over a
  key not known in order, with the check that it is (one read for both).
"""
CNT_WAYS = 4                               # counters per group (a power of 2)


@njit(cache=True)
def _empty_table(size):
    """An open-addressing table of `size` slots: (ids all -1, slots). The fused group_by's
    generated chunks (fused_cpu.py) call it too: numba then types no NumPy allocation there."""
    ids = np.full(size, -1, np.int32)
    return ids, np.empty(size, np.uint64)


@njit(cache=True)
def rank_block(boff, s):
    """The block b with boff[b] <= s < boff[b + 1] (np.searchsorted(boff, s, 'right') - 1
    over nondecreasing boff): where the fused group_by's walk to the survivor of rank s
    starts (fused_cpu.py; here, compiled once per machine, so no query's module types a
    searchsorted)."""
    lo, hi = 0, boff.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if boff[mid] <= s:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True)
def _local_ids(u, lo, hi, limit, lid, words, first, cnt, kind, sign, ones, inf):
    """Step 1 for rows [lo, hi): the number of local groups, or -1 past `limit`. Keys of
    one byte index a 256-entry table directly; wider ones hash. Counts go to CNT_WAYS
    counters per group by row (no chain of increments through one memory cell)."""
    direct = u.itemsize == 1
    tbits = 8 if direct else _table_bits(limit)
    size = 1 << tbits
    mask = np.uint64(size - 1)
    sh = np.uint64(64 - tbits)
    ids, slots = _empty_table(size)
    m = 0
    isf = kind == FLOAT
    for i in range(lo, hi):
        # the table holds raw bits (one-to-one with the order bits) except for floats,
        # whose NaNs and zeros must collapse; order_bits per row costs more than the lookup
        w = order_bits(u[np.uint64(i)], kind, False, sign, ones, inf) if isf else np.uint64(u[np.uint64(i)])
        s = w if direct else (w * _GOLDEN) >> sh
        while ids[s] >= 0 and slots[s] != w:
            s = (s + _U1) & mask
        j = ids[s]
        if j < 0:
            if m == limit:
                return -1
            j = m
            m += 1
            ids[s], slots[s] = j, w
            words[j], first[j] = order_bits(u[np.uint64(i)], kind, False, sign, ones, inf), i
            for r in range(CNT_WAYS):
                cnt[j * CNT_WAYS + r] = 0
        lid[np.uint64(i)] = j
        cnt[np.uint64(j * CNT_WAYS) + (np.uint64(i) & np.uint64(CNT_WAYS - 1))] += 1
    return m


@njit(cache=True)
def _merge_ids(words, first, cnt, nloc, limit):
    """Steps 2-3: (ok, remap [nch, max local], first row and count per sorted group)."""
    nch = nloc.shape[0]
    L = max(1, nloc.max())
    remap = np.empty((nch, L), np.int32)
    bad = (False, remap, np.empty(0, np.int64), np.empty(0, np.int64))
    if nloc.min() < 0:
        return bad
    tbits = _table_bits(limit)
    size = 1 << tbits
    mask = np.uint64(size - 1)
    sh = np.uint64(64 - tbits)
    ids = np.full(size, -1, np.int32)
    gw = np.empty(limit, np.uint64)
    gfirst = np.empty(limit, np.int64)
    gcnt = np.zeros(limit, np.int64)
    G = 0
    for c in range(nch):
        for j in range(nloc[c]):
            w = words[c, j]
            s = (w * _GOLDEN) >> sh
            while ids[s] >= 0 and gw[ids[s]] != w:
                s = (s + _U1) & mask
            g = ids[s]
            if g < 0:
                if G == limit:
                    return bad
                g = G
                G += 1
                ids[s], gw[g], gfirst[g] = g, w, first[c, j]
            remap[c, j] = g
            for r in range(CNT_WAYS):
                gcnt[g] += cnt[c, j * CNT_WAYS + r]
    order = np.argsort(gw[:G])                  # words are distinct: any sort is exact
    rank = np.empty(G, np.int32)
    for r in range(G):
        rank[order[r]] = r
    for c in range(nch):
        for j in range(nloc[c]):
            remap[c, j] = rank[remap[c, j]]
    return True, remap, gfirst[order], gcnt[order]


@njit(cache=True, nogil=True)
def group_local_ids(c0, c1, n, u, limit, lid, words, first, cnt, nloc, kind, sign, ones, inf):
    """Step 1 for chunks [c0, c1): nloc[c] = chunk c's local groups (-1 past `limit`)."""
    for c in range(c0, c1):
        nloc[c] = _local_ids(u, c * CHUNK, min(n, c * CHUNK + CHUNK), limit, lid, words[c],
                             first[c], cnt[c], kind, sign, ones, inf)


@njit(cache=True, nogil=True)
def group_merge_ids(words, first, cnt, nloc, limit):
    """Steps 2-3 (one call): (ok, remap, first row and count per sorted group)."""
    return _merge_ids(words, first, cnt, nloc, limit)


@njit(cache=True)
def _breaks(u, lo, hi, new, kind, sign, ones, inf):
    for i in range(max(lo, 1), hi):
        j = np.uint64(i)
        a = order_bits(u[j - _U1], kind, False, sign, ones, inf)
        new[j] |= a != order_bits(u[j], kind, False, sign, ones, inf)


@njit(cache=True, nogil=True)
def sorted_breaks_chunks(c0, c1, n, u, new, bad, kind, sign, ones, inf):
    """A key u not known in order, in ONE read: new[i] = its order bits change at i, and
    bad[c] = 1 when chunk c finds them descending (from the previous chunk's last key on;
    each chunk stops at its first descent, after a block of 1024 compared without a branch:
    its `new` is then incomplete and the caller sorts)."""
    for c in range(c0, c1):
        lo, hi = max(c * CHUNK, 1), min(n, c * CHUNK + CHUNK)
        flag = False
        for b in range(lo, hi, 1024):
            for i in range(b, min(hi, b + 1024)):
                j = np.uint64(i)
                a = order_bits(u[j - _U1], kind, False, sign, ones, inf)
                z = order_bits(u[j], kind, False, sign, ones, inf)
                flag |= a > z
                new[j] = a != z
            if flag:
                break
        bad[c] = flag


@njit(cache=True, nogil=True)
def breaks_chunks(c0, c1, n, u, new, kind, sign, ones, inf):
    """new[i] |= sorted key u changes at i (order bits: NaNs equal, -0.0 == 0.0), for the
    rows of chunks [c0, c1)."""
    for c in range(c0, c1):
        _breaks(u, c * CHUNK, min(n, c * CHUNK + CHUNK), new, kind, sign, ones, inf)
