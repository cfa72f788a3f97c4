"""numba kernels of the cpu hash join (cpu_join.py).

This text is never imported by querycompute: cpu_join.py appends it to ops/sort/cpu_kernels.py's
text (it uses order_bits, _GOLDEN, _table_bits and CHUNK from there, so key equality has one
home: equal order bits, i.e. all NaNs one value and -0.0 == 0.0) and loads the whole through
the cpu backend's disk cache.

Keys arrive as the raw bits of both sides' common type (or several keys' order bits packed
into one uint64 word by the stage kernels' `pack`).
  build (join_build, one call: the build is serial): an open-addressing table (twice the build side's rows, Fibonacci
      hashing) of the distinct words; per word the first row holding it (word and row side
      by side in one 16-byte slot: a lookup touches one cache line), and `nxt` chains the
      rows of equal words in index order; a bloom array of 8 bits per slot (the hash's next
      3 bits) lets most missing probes skip the table.
  probe (join_probe_counts, join_probe_write: steps over ranges of chunks, run by the
      morsel scheduler; the offsets between them on the host): per fixed chunk of probe
      rows, pass 1 counts each row's matches (a row without one counts 1 in an outer join), an exclusive prefix sum gives
      every chunk its offset, pass 2 writes (probe row, build row) pairs: probe rows in
      order, each one's build rows in index order (-1: no match, outer only). An inner
      join's pass 1 puts the bloom tests of every 64 probe rows into one bit word, without
      a branch (a loop that vectorises), walks the table for the set bits only and clears
      the bits of the bloom's false positives; pass 2 walks the table for the bits left,
      the matching rows. A probe that misses costs a hash and one load, once, not a
      mispredicted branch twice (Q12's 1.5M orders against 30K lines: 8% pass the bloom
      test, 2% match).
  by_left (join_by_left, one call): pairs produced in the right side's order (the left side
      was the smaller and was built on) put in the left side's order by a counting scatter,
      which keeps the right order among a left row's matches; an outer join gives each left
      row without a match one pair (row, -1).
  dense (join_dense_build, one call; join_dense_counts, join_dense_write by morsels): a
      build side of ONE integer key whose values span at most a few times its rows (primary
      keys: TPC-H's part, supplier, customer keys) is indexed directly, not hashed: head[k -
      lo] the first row of key k, nxt its next row (int32 rows) (built from the last row back, so every
      chain is in index order; no nxt walk when no key repeats). A probe is one range test
      and one load; the passes, counts and pairs are the hash join's.
  ranked (join_rank_build, one call; the dense passes): a build side of one integer key
      spanning more than that but at most cpu_join.DENSE_BITS values per row (a filtered
      primary key: Q5's orders of one year, 227K keys over 6M values) is indexed by RANK: one
      bit per value of the range, each 64-bit word's count of set bits before it (uint32),
      and head / nxt per distinct key in the order of its rank. A probe is one range test,
      a bit test and, for a hit, a popcount of the bits below it: the bitmap tested is 750 KB
      for Q5's orders (in a core's L2), where a direct index is 24 MB and the hash table 8 MB of random loads.
      Both dense passes of an inner join keep the hits of every 64 probe rows in one bit
      word (pass 1, without a branch; counted by popcount) and pass 2 walks the hits only.
  member (join_member_chunks): intersect_by / except_by: per probe row (this side; the
      other side built), whether its word is in the table (bloom bit, then the table walk to
      the head row): a flag per row, in parallel chunks (except_by's pass keeps the rows
      without it).
  dense member (join_bounds, member_dense_build, member_dense_chunks): a semi-join whose other
      side's words span a range of at most cpu_join.DENSE_BITS bits per row (integer keys drawn from a
      dense range: TPC-H's order, part, supplier keys) skips the hash table: one bit per word
      of the range (the word's order bits less the smallest), set in one serial pass, and each
      probe row tests its bit (a word outside the range: no bit), by morsels. A bitmap of
      6M bits (Q21's failed orders over l_orderkey) is 750 KB and stays in a core's L2.
Every step is exact integer work: no thread count or chunking changes the pairs.
"""
from numba.cpython.unsafe.numbers import trailing_zeros   # numba's cttz intrinsic


@njit(cache=True)
def join_build(u, kind, sign, ones, inf):
    """(slots: per slot its word and 1 + its head row, 0 when empty; nxt row of each row's
    chain; bloom bits)."""
    m = u.shape[0]
    tbits = _table_bits(max(m, 1))
    size = 1 << tbits
    mask = np.uint64(size - 1)
    sh = np.uint64(64 - tbits)
    slots = np.zeros((size, 2), np.uint64)
    tail = np.empty(size, np.int64)
    nxt = np.full(m, -1, np.int64)
    bloom = np.zeros(max(1, size >> 3), np.uint64)     # 8 bits per slot: 16+ per build row
    for i in range(m):
        w = order_bits(u[np.uint64(i)], kind, False, sign, ones, inf)
        b = (w * _GOLDEN) >> (sh - np.uint64(3))
        bloom[b >> np.uint64(6)] |= _U1 << (b & np.uint64(63))
        s = (w * _GOLDEN) >> sh
        while slots[s, 1] != _U0 and slots[s, 0] != w:
            s = (s + _U1) & mask
        if slots[s, 1] == _U0:
            slots[s, 0], slots[s, 1] = w, np.uint64(i + 1)
        else:
            nxt[tail[s]] = i
        tail[s] = i
    return slots, nxt, bloom


@njit(cache=True)
def _shift_mask(slots):
    """The hash shift and slot mask of a table of slots.shape[0] (a power of 2) slots."""
    size = slots.shape[0]
    tbits = 0
    while (1 << tbits) < size:
        tbits += 1
    return np.uint64(64 - tbits), np.uint64(size - 1)


@njit(cache=True)
def _bloom_bit(w, bloom, sh):
    """1 when word w may be in the table (its bloom bit is set), else 0: no branch."""
    b = (w * _GOLDEN) >> (sh - np.uint64(3))
    return (bloom[b >> np.uint64(6)] >> (b & np.uint64(63))) & _U1


@njit(cache=True)
def _head(w, slots, sh, mask):
    """The first build row whose word is w, or -1 (the table walk, no bloom test)."""
    s = (w * _GOLDEN) >> sh
    while slots[s, 1] != _U0 and slots[s, 0] != w:
        s = (s + _U1) & mask
    return np.int64(slots[s, 1]) - 1


@njit(cache=True)
def _bloom_words(v, lo, hi, bw, bloom, sh, kind, sign, ones, inf):
    """bw[k] bit t set when probe row 64k + t (lo <= it < hi, lo a multiple of 64) passes the
    bloom test: the tests without a branch, so the loop vectorises."""
    for b in range(lo, hi, 64):
        word = _U0
        for i in range(b, min(hi, b + 64)):
            w = order_bits(v[np.uint64(i)], kind, False, sign, ones, inf)
            word |= _bloom_bit(w, bloom, sh) << np.uint64(i - b)
        bw[b >> 6] = word


@njit(cache=True)
def _probe_count(v, lo, hi, bw, slots, nxt, bloom, outer, kind, sign, ones, inf):
    """Matches of probe rows [lo, hi) (an outer join: at least 1 per row). An inner join
    fills bw with the bloom words, walks the table for their set bits and clears the bits
    of rows without a match."""
    sh, mask = _shift_mask(slots)
    total = 0
    if outer:                          # every row gives a pair: walk them all
        for i in range(lo, hi):
            w = order_bits(v[np.uint64(i)], kind, False, sign, ones, inf)
            j = _head(w, slots, sh, mask) if _bloom_bit(w, bloom, sh) else -1
            c = 0
            while j >= 0:
                c += 1
                j = nxt[j]
            total += max(c, 1)
        return total
    _bloom_words(v, lo, hi, bw, bloom, sh, kind, sign, ones, inf)
    for b in range(lo, hi, 64):
        word = bw[b >> 6]
        found = word
        while word != _U0:
            t = trailing_zeros(word)   # the next set bit
            word &= word - _U1
            j = _head(order_bits(v[np.uint64(b + t)], kind, False, sign, ones, inf), slots, sh, mask)
            if j < 0:                  # a false positive of the bloom test: pass 2 skips it
                found ^= _U1 << np.uint64(t)
            while j >= 0:
                total += 1
                j = nxt[j]
        bw[b >> 6] = found
    return total


@njit(cache=True)
def _pairs_of(i, j, nxt, chained, pi, bj, pos):
    """Probe row i's pairs from pi / bj[pos] on, the position after them: (i, j) and i with
    each next row of j's chain (nxt; only when chained), or (i, -1) when j < 0 (an outer
    join's row without a match). (One return: numba inlines it.)"""
    if j < 0:
        pi[pos], bj[pos] = i, -1
        pos += 1
    while j >= 0:
        pi[pos], bj[pos] = i, j
        pos += 1
        j = np.int64(nxt[j]) if chained else np.int64(-1)
    return pos


@njit(cache=True)
def _probe_write(v, lo, hi, bw, pos, slots, nxt, bloom, outer, pi, bj, kind, sign, ones, inf):
    """The pairs of probe rows [lo, hi) from pi/bj[pos] on; an inner join walks the rows
    whose bits _probe_count left set in bw (each has a match)."""
    sh, mask = _shift_mask(slots)
    if outer:
        for i in range(lo, hi):
            w = order_bits(v[np.uint64(i)], kind, False, sign, ones, inf)
            j = _head(w, slots, sh, mask) if _bloom_bit(w, bloom, sh) else -1
            pos = _pairs_of(i, j, nxt, True, pi, bj, pos)
        return
    for b in range(lo, hi, 64):
        word = bw[b >> 6]
        while word != _U0:
            i = b + trailing_zeros(word)
            word &= word - _U1
            j = _head(order_bits(v[np.uint64(i)], kind, False, sign, ones, inf), slots, sh, mask)
            pos = _pairs_of(i, j, nxt, True, pi, bj, pos)


@njit(cache=True, nogil=True)
def join_probe_counts(c0, c1, n, v, bw, slots, nxt, bloom, outer, cnt, kind, sign, ones, inf):
    """Pass 1 over chunks [c0, c1) of the probe rows: cnt[c + 1] = chunk c's pairs (CHUNK is
    a multiple of 64, so every chunk owns whole bloom words of bw)."""
    for c in range(c0, c1):
        cnt[c + 1] = _probe_count(v, c * CHUNK, min(n, c * CHUNK + CHUNK), bw, slots, nxt, bloom,
                                  outer, kind, sign, ones, inf)


@njit(cache=True, nogil=True)
def join_probe_write(c0, c1, n, v, bw, off, slots, nxt, bloom, outer, pi, bj, kind, sign, ones, inf):
    """Pass 2: chunk c's pairs from pi / bj[off[c]] on, probe rows in order."""
    for c in range(c0, c1):
        _probe_write(v, c * CHUNK, min(n, c * CHUNK + CHUNK), bw, off[c], slots, nxt, bloom,
                     outer, pi, bj, kind, sign, ones, inf)


@njit(cache=True)
def join_dense_build(u, lo, size):
    """(head, nxt, chained) of a dense build side (module doc: dense): head[k - lo] the first
    row holding key k or -1, nxt[i] the next row of row i's key or -1; chained: whether any
    key repeats (else the probe reads no nxt)."""
    m = u.shape[0]                     # (< 2**31 rows: int32 rows halve the index's cache lines)
    head = np.full(size, -1, np.int32)
    nxt = np.empty(m, np.int32)
    chained = False
    for i in range(m - 1, -1, -1):
        k = np.int64(u[i]) - lo
        nxt[i] = head[k]
        chained |= head[k] >= 0
        head[k] = np.int32(i)
    return head, nxt, chained


@njit(cache=True)
def _popcount(x):
    """The set bits of the uint64 x (the SWAR count; LLVM makes it one popcnt)."""
    x = x - ((x >> _U1) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True)
def _rank(d, bits, ranks):
    """The rank of offset d's bit (the set bits below it; d inside the bitmap): ranks[w] the
    set bits of the words before word w."""
    w = d >> np.uint64(6)
    below = bits[w] & ((_U1 << (d & np.uint64(63))) - _U1)
    return np.int64(ranks[w]) + np.int64(_popcount(below))


@njit(cache=True)
def join_rank_build(u, lo, span):
    """(bits, ranks, head, nxt, chained) of a ranked build side (module doc: ranked): bit
    k - lo set for each key k (lo <= k <= lo + span), ranks[w] the set bits before word w
    (_rank), head[r] the first row of the key of rank r, nxt and chained as the dense
    build's."""
    m = u.shape[0]
    nw = (span >> 6) + 1
    bits = np.zeros(nw, np.uint64)
    for i in range(m):
        d = np.uint64(np.int64(u[i]) - lo)
        bits[d >> np.uint64(6)] |= _U1 << (d & np.uint64(63))
    ranks = np.empty(nw, np.uint32)
    r = 0
    for w in range(nw):
        ranks[w] = r
        r += np.int64(_popcount(bits[w]))
    head = np.full(r, -1, np.int32)
    nxt = np.empty(m, np.int32)
    chained = False
    for i in range(m - 1, -1, -1):
        k = _rank(np.uint64(np.int64(u[i]) - lo), bits, ranks)
        nxt[i] = head[k]
        chained |= head[k] >= 0
        head[k] = np.int32(i)
    return bits, ranks, head, nxt, chained


@njit(cache=True)
def _dense_head(x, head, lo):
    """The first build row of key x, or -1 (a key outside the build side's range: none).
    (One return: numba inlines it; a helper with an early return cost ~100 ns a call.)"""
    k = np.int64(x) - lo
    inside = k >= 0 and k < head.shape[0]
    return np.int64(head[k]) if inside else np.int64(-1)


@njit(cache=True)
def _rank_head(x, head, lo, bits, ranks):
    """The first build row of key x by the rank of its bit (_rank), or -1 (no bit: none).
    (One return, as _dense_head.)"""
    d = np.uint64(np.int64(x) - lo)                  # wraps below lo: outside
    inside = d < (np.uint64(bits.shape[0]) << np.uint64(6))
    d = d if inside else _U0
    hit = inside and ((bits[d >> np.uint64(6)] >> (d & np.uint64(63))) & _U1) != _U0
    return np.int64(head[_rank(d, bits, ranks) if hit else 0]) if hit else np.int64(-1)


@njit(cache=True)
def _hit_words(v, b, e, head, lo, bits, ranked):
    """The hits of probe rows [b, e) (e - b <= 64) as one bit word: a key's bit in the ranked
    bitmap, or its head entry, tested without a branch (a loop per kind: both vectorise)."""
    word = _U0
    if ranked:
        size = np.uint64(bits.shape[0]) << np.uint64(6)
        for i in range(b, e):
            d = np.uint64(np.int64(v[i]) - lo)
            inside = d < size
            d = d if inside else _U0
            bit = (bits[d >> np.uint64(6)] >> (d & np.uint64(63))) & _U1
            word |= (bit if inside else _U0) << np.uint64(i - b)
    else:
        size = np.uint64(head.shape[0])
        for i in range(b, e):
            d = np.uint64(np.int64(v[i]) - lo)
            inside = d < size
            d = d if inside else _U0
            word |= np.uint64(inside and head[d] >= 0) << np.uint64(i - b)
    return word


@njit(cache=True)
def _first(x, head, lo, bits, ranks, ranked):
    """The first build row of key x, or -1 (_rank_head or _dense_head)."""
    return _rank_head(x, head, lo, bits, ranks) if ranked else _dense_head(x, head, lo)


@njit(cache=True, nogil=True)
def join_dense_counts(c0, c1, n, v, head, nxt, chained, lo, bits, ranks, ranked, outer, bw, cnt):
    """Pass 1 over chunks [c0, c1) of the probe rows: cnt[c + 1] = chunk c's pairs. An inner
    join puts the hits of every 64 probe rows into one bit word of bw (a loop without a
    branch) and counts them with popcounts (walking the chains of the hits only when a key
    repeats)."""
    for c in range(c0, c1):
        a, e = c * CHUNK, min(n, c * CHUNK + CHUNK)
        total = 0
        if outer:
            for i in range(a, e):
                j = _first(v[i], head, lo, bits, ranks, ranked)
                k = 0
                while j >= 0:
                    k += 1
                    j = np.int64(nxt[j]) if chained else np.int64(-1)
                total += max(k, 1)
        else:
            for b in range(a, e, 64):
                word = _hit_words(v, b, min(e, b + 64), head, lo, bits, ranked)
                bw[b >> 6] = word
                total += np.int64(_popcount(word))
                while chained and word != _U0:           # each hit's further rows
                    t = trailing_zeros(word)
                    word &= word - _U1
                    j = np.int64(nxt[_first(v[b + t], head, lo, bits, ranks, ranked)])
                    while j >= 0:
                        total += 1
                        j = np.int64(nxt[j])
        cnt[c + 1] = total


@njit(cache=True, nogil=True)
def join_dense_write(c0, c1, n, v, head, nxt, chained, lo, bits, ranks, ranked, outer, bw, off, pi, bj):
    """Pass 2: chunk c's pairs from pi / bj[off[c]] on, probe rows in order (-1: no match,
    outer only); an inner join walks the hits pass 1 left in bw."""
    for c in range(c0, c1):
        a, e = c * CHUNK, min(n, c * CHUNK + CHUNK)
        pos = off[c]
        if outer:
            for i in range(a, e):
                pos = _pairs_of(i, _first(v[i], head, lo, bits, ranks, ranked), nxt, chained, pi, bj, pos)
        else:
            for b in range(a, e, 64):
                word = bw[b >> 6]
                while word != _U0:
                    i = b + trailing_zeros(word)
                    word &= word - _U1
                    pos = _pairs_of(i, _first(v[i], head, lo, bits, ranks, ranked), nxt, chained, pi, bj, pos)


@njit(cache=True)
def join_by_left(li, ri, nl, outer):
    """The pairs (li, ri), in right order, in left order instead (module doc)."""
    cnt = np.zeros(nl, np.int64)
    for t in range(li.shape[0]):
        cnt[li[t]] += 1
    start = np.zeros(nl + 1, np.int64)
    for i in range(nl):
        start[i + 1] = start[i] + (max(cnt[i], 1) if outer else cnt[i])
    out_l, out_r = np.empty(start[nl], np.int64), np.empty(start[nl], np.int64)
    pos = start[:nl].copy()
    if outer:
        for i in range(nl):
            if cnt[i] == 0:
                out_l[start[i]], out_r[start[i]] = i, -1
    for t in range(li.shape[0]):
        p = pos[li[t]]
        out_l[p], out_r[p] = li[t], ri[t]
        pos[li[t]] = p + 1
    return out_l, out_r


@njit(cache=True)
def _member(v, lo, hi, slots, bloom, out, kind, sign, ones, inf):
    """out[i] for probe rows [lo, hi): whether word i is in the table."""
    sh, mask = _shift_mask(slots)
    for i in range(lo, hi):
        w = order_bits(v[np.uint64(i)], kind, False, sign, ones, inf)
        hit = _bloom_bit(w, bloom, sh) != _U0 and _head(w, slots, sh, mask) >= 0
        out[i] = hit


@njit(cache=True, nogil=True)
def join_member_chunks(c0, c1, n, v, slots, bloom, out, kind, sign, ones, inf):
    """The semi-join's keep flags of chunks [c0, c1) (module doc)."""
    for c in range(c0, c1):
        _member(v, c * CHUNK, min(n, c * CHUNK + CHUNK), slots, bloom, out, kind, sign, ones, inf)


@njit(cache=True)
def join_bounds(u, kind, sign, ones, inf):
    """(smallest, largest) order bits of the words u (u not empty)."""
    lo = order_bits(u[np.uint64(0)], kind, False, sign, ones, inf)
    hi = lo
    for i in range(1, u.shape[0]):
        w = order_bits(u[np.uint64(i)], kind, False, sign, ones, inf)
        lo = min(lo, w)
        hi = max(hi, w)
    return lo, hi


@njit(cache=True)
def member_dense_build(u, lo, span, kind, sign, ones, inf):
    """The bitmap of the words u: bit w - lo set for each word w (lo <= w <= lo + span)."""
    bits = np.zeros((span >> np.uint64(6)) + _U1, np.uint64)
    for i in range(u.shape[0]):
        d = order_bits(u[np.uint64(i)], kind, False, sign, ones, inf) - lo
        bits[d >> np.uint64(6)] |= _U1 << (d & np.uint64(63))
    return bits


@njit(cache=True, nogil=True)
def member_dense_chunks(c0, c1, n, v, lo, span, bits, out, kind, sign, ones, inf):
    """The semi-join's keep flags of chunks [c0, c1) from the bitmap (no branch: a word
    outside the range tests bit 0 and is masked out)."""
    for i in range(c0 * CHUNK, min(n, c1 * CHUNK)):
        d = order_bits(v[np.uint64(i)], kind, False, sign, ones, inf) - lo   # wraps below lo
        inside = d <= span
        d = d if inside else _U0
        bit = (bits[d >> np.uint64(6)] >> (d & np.uint64(63))) & _U1
        out[i] = inside & (bit != _U0)
