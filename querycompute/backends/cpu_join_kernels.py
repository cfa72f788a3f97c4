"""numba kernels of the cpu hash join (cpu_join.py).

This text is never imported by querycompute: cpu_join.py appends it to cpu_stage_kernels.py's
text (it uses order_bits, _GOLDEN, _table_bits and CHUNK from there, so key equality has one
home: equal order bits, i.e. all NaNs one value and -0.0 == 0.0) and loads the whole through
the cpu backend's disk cache.

Keys arrive as the raw bits of both sides' common type (or several keys' order bits packed
into one uint64 word by the stage kernels' `pack`).
  build (join_build_serial): an open-addressing table (twice the build side's rows, Fibonacci
      hashing) of the distinct words; per word the first row holding it, and `nxt` chains
      the rows of equal words in index order; a bloom array of 8 bits per slot (the hash's
      next 3 bits) lets most missing probes skip the table.
  probe (join_probe_parallel): per fixed chunk of probe rows, pass 1 counts each row's
      matches (a row without one counts 1 in an outer join), an exclusive prefix sum gives
      every chunk its offset, pass 2 writes (probe row, build row) pairs: probe rows in
      order, each one's build rows in index order (-1: no match, outer only).
  by_left (join_by_left_serial): pairs produced in the right side's order (the left side
      was the smaller and was built on) put in the left side's order by a counting scatter,
      which keeps the right order among a left row's matches; an outer join gives each left
      row without a match one pair (row, -1).
Every step is exact integer work: no thread count or chunking changes the pairs.
"""


@njit(cache=True)
def join_build_serial(u, kind, sign, ones, inf):
    """(head row per slot or -1, word per slot, nxt row of each row's chain, bloom bits)."""
    m = u.shape[0]
    tbits = _table_bits(max(m, 1))
    size = 1 << tbits
    mask = np.uint64(size - 1)
    sh = np.uint64(64 - tbits)
    head = np.full(size, -1, np.int64)
    tail = np.empty(size, np.int64)
    words = np.empty(size, np.uint64)
    nxt = np.full(m, -1, np.int64)
    bloom = np.zeros(max(1, size >> 3), np.uint64)     # 8 bits per slot: 16+ per build row
    for i in range(m):
        w = order_bits(u[np.uint64(i)], kind, False, sign, ones, inf)
        b = (w * _GOLDEN) >> (sh - np.uint64(3))
        bloom[b >> np.uint64(6)] |= _U1 << (b & np.uint64(63))
        s = (w * _GOLDEN) >> sh
        while head[s] >= 0 and words[s] != w:
            s = (s + _U1) & mask
        if head[s] < 0:
            head[s], words[s] = i, w
        else:
            nxt[tail[s]] = i
        tail[s] = i
    return head, words, nxt, bloom


@njit(cache=True)
def _shift_mask(head):
    """The hash shift and slot mask of a table of head.shape[0] (a power of 2) slots."""
    size = head.shape[0]
    tbits = 0
    while (1 << tbits) < size:
        tbits += 1
    return np.uint64(64 - tbits), np.uint64(size - 1)


@njit(cache=True)
def _find(w, head, words, bloom, sh, mask):
    """The first build row whose word is w, or -1. Most probes of a selective join miss:
    one bit of the bloom array (16 bits per build row) answers most of those."""
    b = (w * _GOLDEN) >> (sh - np.uint64(3))
    if ((bloom[b >> np.uint64(6)] >> (b & np.uint64(63))) & _U1) == _U0:
        return -1
    s = b >> np.uint64(3)
    while head[s] >= 0 and words[s] != w:
        s = (s + _U1) & mask
    return head[s]


@njit(cache=True)
def _probe_count(v, lo, hi, head, words, nxt, bloom, outer, kind, sign, ones, inf):
    sh, mask = _shift_mask(head)
    total = 0
    for i in range(lo, hi):
        j = _find(order_bits(v[np.uint64(i)], kind, False, sign, ones, inf), head, words, bloom, sh, mask)
        c = 0
        while j >= 0:
            c += 1
            j = nxt[j]
        total += max(c, 1) if outer else c
    return total


@njit(cache=True)
def _probe_write(v, lo, hi, pos, head, words, nxt, bloom, outer, pi, bj, kind, sign, ones, inf):
    sh, mask = _shift_mask(head)
    for i in range(lo, hi):
        j = _find(order_bits(v[np.uint64(i)], kind, False, sign, ones, inf), head, words, bloom, sh, mask)
        if j < 0 and outer:
            pi[pos], bj[pos] = i, -1
            pos += 1
        while j >= 0:
            pi[pos], bj[pos] = i, j
            pos += 1
            j = nxt[j]


@njit(cache=True)
def join_probe_serial(v, head, words, nxt, bloom, outer, kind, sign, ones, inf):
    """(probe rows, build rows) of every match, in probe order (module doc): one chunk."""
    n = v.shape[0]
    total = _probe_count(v, 0, n, head, words, nxt, bloom, outer, kind, sign, ones, inf)
    pi, bj = np.empty(total, np.int64), np.empty(total, np.int64)
    _probe_write(v, 0, n, 0, head, words, nxt, bloom, outer, pi, bj, kind, sign, ones, inf)
    return pi, bj


@njit(cache=True, parallel=PRANGE_ONLY)
def join_probe_parallel(v, head, words, nxt, bloom, outer, kind, sign, ones, inf):
    """join_probe_serial with both passes parallel over the chunks."""
    n = v.shape[0]
    nch = (n + CHUNK - 1) // CHUNK
    off = np.zeros(nch + 1, np.int64)
    for c in prange(nch):
        off[c + 1] = _probe_count(v, c * CHUNK, min(n, c * CHUNK + CHUNK), head, words, nxt, bloom,
                                  outer, kind, sign, ones, inf)
    for c in range(nch):
        off[c + 1] += off[c]
    pi, bj = np.empty(off[nch], np.int64), np.empty(off[nch], np.int64)
    for c in prange(nch):
        _probe_write(v, c * CHUNK, min(n, c * CHUNK + CHUNK), off[c], head, words, nxt, bloom,
                     outer, pi, bj, kind, sign, ones, inf)
    return pi, bj


@njit(cache=True)
def join_by_left_serial(li, ri, nl, outer):
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
