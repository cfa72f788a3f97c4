"""numba kernels of the cpu stage runtime (cpu_stages.py): radix sort, top-k, gather and
distinct's first-occurrence flags. The scan is generated per combine (ops/scan/cpu.py).

This file is never imported by querycompute: numba_loader.stage_kernels_source puts
order_keys.NUMBA_SOURCE (numba's `order_bits` and the key kinds UNSIGNED, SIGNED, FLOAT) before
its text and loads the whole through the cpu backend's disk cache (key = the text), so
numba's compiled code is cached beside it in the kernel cache like every other cpu kernel.

Keys travel as their RAW bits (the key's uint view: bool/int8/uint8 -> uint8, float16 ->
uint16, ...), and every kernel computes `order_bits` (order_keys.transform, spelled in
integer operations: _codegen/order_keys.py) where it needs a key's order: a sort moves the
raw bits, so sorted values keep -0.0 and NaN payloads exactly, and no transformed copy is
ever written.

Loads and stores index with unsigned integers: numba then emits no negative-index fix-up
(which costs up to 2x in these loops). Chunks are CHUNK elements whatever the thread count.
Every entry point is ONE STEP over a range of chunks [c0, c1) (or of hash partitions), run
without the GIL; the cpu stage runtime calls it through the morsel scheduler
(backends/cpu/morsels.py: one call on the caller's thread for a small input, morsels handed
out dynamically to the pool otherwise) and does the small sequential work between steps
(prefix sums of counts) with NumPy. Each step writes only its own chunks' slots, so no
thread count or schedule can change a result.

Radix sort (radix_counts, radix_digit_counts, radix_scatter; radix_one: an input of one
chunk in one call): LSD, 8-bit digits, least significant first.
  1. one read pass: per chunk, histograms of EVERY digit (nch x width x 256 counts); a digit
     whose global histogram has a single non-empty bucket is skipped (all keys share it).
  2. per active digit: per-chunk histograms (the first active digit reuses step 1's), then
     offsets in (digit, chunk) order: offset[c, d] = #elements with a smaller digit +
     #elements of digit d in chunks before c; then every chunk scatters its elements in
     index order to offset[c, d]++. Chunk c's elements of digit d land after those of
     earlier chunks and in their own order: each pass is stable, so the sort is.
  The payload is the int64 index permutation (mode 1: the pass's first makes it from i).
Top-k (topk_chunks): every chunk keeps its k smallest (key, index) in a max-heap (a new
  element enters only below the heap's top, and chunk 0's k-th key bounds every other
  chunk's: with random data almost every block of keys costs one vectorised count); the
  union of the chunks' candidates holds the global top k, which cpu_stages sorts (a small
  radix sort, candidates in index order: ties go by index).
First occurrence (distinct_words, distinct_scatter, distinct_sets): each element's key is
  one exact uint64 word (its order bits, or several keys' bits packed), or two (`u2`: a key
  tuple of up to 128 bits, whole columns packed into two words; wider tuples take a sort in
  cpu_stages). Words (a second word mixed into the first's hash) are hashed into P
  partitions; a counting scatter (as a radix pass: stable) puts each partition's (word,
  index) pairs in index order; each partition then runs an open-addressing hash set in that
  order, so the first insert of a word is its first occurrence (one partition: the words in
  place, no scatter). The flags are exact booleans: no order or thread count can change them.
  A key tuple whose FIRST field is already in ascending order (the rows of a table sorted by
  it: TPC-H's lines by l_orderkey; a per-group distinct count's (group key, f) pairs) takes
  distinct_runs instead: an equal key tuple can only occur in the run of equal first fields,
  so each row is compared with the earlier rows of its run (runs of at most RUN_MAX rows; a
  chunk that finds its first field out of order or a longer run says so and the hash sets
  above run instead): one read pass, no partitions.
"""
import numpy as np
from numba import njit

CHUNK = 1 << 16
RADIX = 256
TOPK_BLOCK = 64                             # keys compared with a full heap's top at once
RUN_MAX = 64                                # distinct_runs: the longest run of equal first fields
_U0, _U1, _U8, _MASK = np.uint64(0), np.uint64(1), np.uint64(8), np.uint64(255)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)    # Fibonacci hashing multiplier
_MIX = np.uint64(0xC2B2AE3D27D4EB4F)       # mixes a second key word into the first's hash


@njit(cache=True)
def _digit(t, shift):
    return (t >> shift) & _MASK


# ---- radix sort ----------------------------------------------------------------------------
@njit(cache=True)
def _hist_all(u, lo, hi, h, kind, desc, sign, ones, inf):
    """h[b, d] += #elements of [lo, hi) whose digit b is d, for every digit b."""
    nb = u.itemsize                     # a constant of u's type: the loop unrolls
    flat = h.reshape(nb * RADIX)
    for i in range(lo, hi):
        t = order_bits(u[np.uint64(i)], kind, desc, sign, ones, inf)
        for b in range(nb):
            flat[np.uint64(b * RADIX) + _digit(t, np.uint64(8 * b))] += 1


@njit(cache=True)
def _hist(u, lo, hi, h, shift, kind, desc, sign, ones, inf):
    for i in range(lo, hi):
        h[_digit(order_bits(u[np.uint64(i)], kind, desc, sign, ones, inf), shift)] += 1


@njit(cache=True)
def _scatter(u, idx, lo, hi, pos, shift, dst, didx, mode, kind, desc, sign, ones, inf):
    """Elements [lo, hi) in order to dst[pos[digit]++]; their payload from idx (mode 2), from
    i (mode 1) or none (mode 0)."""
    for i in range(lo, hi):
        v = u[np.uint64(i)]
        d = _digit(order_bits(v, kind, desc, sign, ones, inf), shift)
        p = np.uint64(pos[d])
        dst[p] = v
        if mode == 1:
            didx[p] = i
        elif mode == 2:
            didx[p] = idx[np.uint64(i)]
        pos[d] = p + _U1


@njit(cache=True, nogil=True)
def radix_counts(c0, c1, n, u, hc, kind, desc, sign, ones, inf):
    """Step 1: hc[c] = chunk c's histograms of every digit (hc: nch x width x 256)."""
    for c in range(c0, c1):
        _hist_all(u, c * CHUNK, min(n, c * CHUNK + CHUNK), hc[c], kind, desc, sign, ones, inf)


@njit(cache=True, nogil=True)
def radix_digit_counts(c0, c1, n, u, hd, shift, kind, desc, sign, ones, inf):
    """Step 2's counts of a later digit: hd[c] = chunk c's histogram of the digit at `shift`."""
    for c in range(c0, c1):
        hd[c, :] = 0
        _hist(u, c * CHUNK, min(n, c * CHUNK + CHUNK), hd[c], shift, kind, desc, sign, ones, inf)


@njit(cache=True, nogil=True)
def radix_scatter(c0, c1, n, src, sidx, off, shift, dst, didx, mode, kind, desc, sign, ones, inf):
    """Step 2's scatter: chunk c's elements in order to dst[off[c, digit]++] (off: the
    caller's offsets in (digit, chunk) order); the payload from sidx (mode 2), from the
    index (mode 1) or none (mode 0)."""
    for c in range(c0, c1):
        _scatter(src, sidx, c * CHUNK, min(n, c * CHUNK + CHUNK), off[c], shift, dst, didx,
                 mode, kind, desc, sign, ones, inf)


@njit(cache=True, nogil=True)
def radix_one(u, idx, mode, kind, desc, sign, ones, inf):
    """An input of one chunk sorted in ONE call (the steps above with nch = 1, without a
    call per step: a small sort costs one call, as a small fused pass does): (sorted raw
    keys, payload)."""
    n, nb = u.shape[0], u.itemsize
    h = np.zeros((nb, RADIX), np.int64)
    _hist_all(u, 0, n, h, kind, desc, sign, ones, inf)
    src, sidx, first_mode = u, idx, mode
    bufs = (np.empty_like(u), np.empty_like(u))
    ibufs = (np.empty(n if mode else 0, np.int64), np.empty(n if mode else 0, np.int64))
    pos = np.empty(RADIX, np.int64)
    k = 0
    for b in range(nb):
        if h[b].max() == n:                 # every key shares this digit
            continue
        run = 0
        for d in range(RADIX):              # offsets: the keys of smaller digits
            pos[d] = run
            run += h[b, d]
        dst, didx = bufs[k % 2], ibufs[k % 2]
        _scatter(src, sidx, 0, n, pos, np.uint64(8 * b), dst, didx, mode, kind, desc, sign, ones, inf)
        src, sidx = dst, didx
        mode = 2 if mode else 0
        k += 1
    if k == 0:                              # no digit varies: the keys as they are
        return u.copy(), (np.arange(n, dtype=np.int64) if first_mode == 1 else idx.copy())
    return src, sidx


# ---- top-k -----------------------------------------------------------------------------------
@njit(cache=True)
def _above(ht, hi_, a, t, i):
    """Heap entry a orders after (t, i)."""
    return ht[a] > t or (ht[a] == t and hi_[a] > i)


@njit(cache=True)
def _sift_down(ht, hi_, m):
    j = 0
    t, i = ht[0], hi_[0]
    while True:
        c = 2 * j + 1
        if c >= m:
            break
        if c + 1 < m and _above(ht, hi_, c + 1, ht[c], hi_[c]):
            c += 1
        if not _above(ht, hi_, c, t, i):
            break
        ht[j], hi_[j] = ht[c], hi_[c]
        j = c
    ht[j], hi_[j] = t, i


@njit(cache=True)
def _topk_chunk(u, lo, hi, k, ht, hi_, bound, kind, desc, sign, ones, inf):
    """The k smallest (order bits, index) of [lo, hi) with bits <= bound into the max-heap
    ht/hi_; returns how many. Indices rise, so a later element beats a full heap's top only
    with smaller bits: blocks without such a key are skipped after one vectorised count."""
    m = 0
    for b in range(lo, hi, TOPK_BLOCK):
        e = min(hi, b + TOPK_BLOCK)
        lim = bound
        if m == k:
            if ht[0] == _U0:
                break                       # nothing orders below all-zero bits
            lim = min(bound, ht[0] - _U1)
        below = 0
        for i in range(b, e):
            below += order_bits(u[np.uint64(i)], kind, desc, sign, ones, inf) <= lim
        if below:
            m = _topk_block(u, b, e, k, m, ht, hi_, bound, kind, desc, sign, ones, inf)
    return m


@njit(cache=True)
def _topk_block(u, lo, hi, k, m, ht, hi_, bound, kind, desc, sign, ones, inf):
    """_topk_chunk's heap updates for the elements of one block; returns the heap size."""
    for i in range(lo, hi):
        t = order_bits(u[np.uint64(i)], kind, desc, sign, ones, inf)
        if t > bound:
            continue
        if m < k:
            j = m                             # sift up
            m += 1
            while j > 0:
                p = (j - 1) // 2
                if _above(ht, hi_, p, t, i):
                    break
                ht[j], hi_[j] = ht[p], hi_[p]
                j = p
            ht[j], hi_[j] = t, i
        elif t < ht[0]:
            ht[0], hi_[0] = t, i
            _sift_down(ht, hi_, m)
    return m


@njit(cache=True, nogil=True)
def topk_chunks(c0, c1, first, n, u, k, ht, hi_, cnt, bound, kind, desc, sign, ones, inf):
    """Chunks first + [c0, c1): each chunk's k smallest (order bits, index) with bits <=
    bound into its own heap ht[c] / hi_[c], cnt[c] of them. The caller runs chunk 0 alone
    first: the largest bits of its full heap bound the global k-th smallest (k elements
    have bits no larger), so every other chunk drops keys above that bound before any heap
    work."""
    for c in range(c0 + first, c1 + first):
        cnt[c] = _topk_chunk(u, c * CHUNK, min(n, c * CHUNK + CHUNK), k, ht[c], hi_[c], bound,
                             kind, desc, sign, ones, inf)


# ---- gather, packing -------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def gather_chunks(c0, c1, col, perm, out):
    """out[i] = col[perm[i]] for the rows of chunks [c0, c1) (raw bits: any 1-8 byte type)."""
    n = perm.shape[0]
    for c in range(c0, c1):
        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):
            out[np.uint64(i)] = col[np.uint64(perm[np.uint64(i)])]


@njit(cache=True)
def _pack(w, u, lo, hi, width, take, kind, desc, sign, ones, inf):
    """w = (w << take) | the top `take` of u's `width` order bits: keys' bits side by side in
    one uint64 word (the whole tuple when it fits, else its first 64 bits)."""
    sh, drop = np.uint64(take), np.uint64(width - take)
    for i in range(lo, hi):
        j = np.uint64(i)
        t = order_bits(u[j], kind, desc, sign, ones, inf) >> drop
        w[j] = ((w[j] << sh) | t) if take < 64 else t


@njit(cache=True, nogil=True)
def pack_chunks(c0, c1, n, w, u, width, take, kind, desc, sign, ones, inf):
    for c in range(c0, c1):
        _pack(w, u, c * CHUNK, min(n, c * CHUNK + CHUNK), width, take, kind, desc, sign, ones, inf)


@njit(cache=True, nogil=True)
def select_le_counts(c0, c1, n, w, bound, cnt):
    """cnt[c + 1] = how many words of chunk c are <= bound."""
    for c in range(c0, c1):
        m = 0
        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):
            m += w[np.uint64(i)] <= bound
        cnt[c + 1] = m


@njit(cache=True, nogil=True)
def select_le_write(c0, c1, n, w, bound, off, out):
    """The indices of chunk c's words <= bound, ascending, from out[off[c]]."""
    for c in range(c0, c1):
        q = off[c]
        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):
            if w[np.uint64(i)] <= bound:
                out[q] = i
                q += 1


# ---- first occurrence --------------------------------------------------------------------------
@njit(cache=True)
def _hash(w, words2, j):
    """The key's hash word: its word, a second word (words2 not empty) mixed in."""
    if words2.shape[0]:
        w ^= words2[np.uint64(j)] * _MIX
    return w * _GOLDEN


@njit(cache=True)
def _set_first(words, words2, order, lo, hi, keep, pbits, tbits):
    """Open-addressing hash set of 2**tbits slots over words[lo:hi] (and words2[lo:hi] when
    not empty: two-word keys), in index order: keep[order[j]] (keep[j] when order is empty)
    = whether the key at j is new. The slot is taken from the hash bits below the pbits that
    chose the partition."""
    size = 1 << tbits
    mask = np.uint64(size - 1)
    two = words2.shape[0] > 0
    used = np.zeros(size, np.bool_)
    slots = np.empty(size, np.uint64)
    slots2 = np.empty(size if two else 0, np.uint64)
    psh, sh = np.uint64(pbits), np.uint64(64 - tbits)
    for j in range(lo, hi):
        w = words[np.uint64(j)]
        w2 = words2[np.uint64(j)] if two else _U0
        s = (_hash(w, words2, j) << psh) >> sh
        while used[s] and (slots[s] != w or (two and slots2[s] != w2)):
            s = (s + _U1) & mask
        keep[np.uint64(order[np.uint64(j)] if order.shape[0] else j)] = not used[s]
        used[s] = True
        slots[s] = w
        if two:
            slots2[s] = w2


@njit(cache=True)
def _table_bits(m):
    b = 1
    while (1 << b) < 2 * m:
        b += 1
    return b


@njit(cache=True)
def _words(u, lo, hi, out, kind, sign, ones, inf):
    for i in range(lo, hi):
        out[np.uint64(i)] = order_bits(u[np.uint64(i)], kind, False, sign, ones, inf)


@njit(cache=True, nogil=True)
def distinct_words(c0, c1, n, u, u2, words, hc, psh, kind, sign, ones, inf):
    """Chunk c's order-bit words, and hc[c] = how many of them hash to each partition (the
    top 64 - psh bits of the hash; psh = 64: one partition)."""
    for c in range(c0, c1):
        lo, hi = c * CHUNK, min(n, c * CHUNK + CHUNK)
        _words(u, lo, hi, words, kind, sign, ones, inf)
        hcc = hc[c]
        if psh == 64:
            hcc[0] += hi - lo
            continue
        for i in range(lo, hi):
            hcc[_hash(words[np.uint64(i)], u2, i) >> np.uint64(psh)] += 1


@njit(cache=True, nogil=True)
def distinct_scatter(c0, c1, n, words, u2, off, psh, pw, pw2, pidx):
    """Chunk c's (word, second word, index) to its partition, from off[c, p] on: a stable
    counting scatter, so each partition holds its rows in index order."""
    two = u2.shape[0] > 0
    for c in range(c0, c1):
        pos = off[c]
        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):
            w = words[np.uint64(i)]
            p = _hash(w, u2, i) >> np.uint64(psh)
            q = np.uint64(pos[p])
            pw[q], pidx[q] = w, i
            if two:
                pw2[q] = u2[np.uint64(i)]
            pos[p] = q + _U1


@njit(cache=True, nogil=True)
def distinct_sets(p0, p1, start, pw, pw2, pidx, keep, pbits):
    """Partitions [p0, p1): each one's hash set over its rows in index order; the first
    insert of a key is its first occurrence (keep[row])."""
    for p in range(p0, p1):
        m = start[p + 1] - start[p]
        if m:
            _set_first(pw, pw2, pidx, start[p], start[p + 1], keep, pbits, _table_bits(m))


@njit(cache=True, nogil=True)
def distinct_runs(c0, c1, n, k0, u, u2, keep, bad, kind, sign, ones, inf):
    """First-occurrence flags of the key words u (and u2) when the first field k0 (raw bits,
    its order-bits constants given) ascends: row i against the earlier rows of its run of
    equal k0. bad[c] = 1 when chunk c finds k0 descending or a run longer than RUN_MAX (its
    flags are then incomplete)."""
    two = u2.shape[0] > 0
    for c in range(c0, c1):
        lo, hi = c * CHUNK, min(n, c * CHUNK + CHUNK)
        bad[c] = 0
        k = order_bits(k0[np.uint64(lo)], kind, False, sign, ones, inf)
        if lo > 0 and order_bits(k0[np.uint64(lo - 1)], kind, False, sign, ones, inf) > k:
            bad[c] = 1
            continue
        s = lo                          # the run's first row (it may start in an earlier chunk)
        while s > 0 and lo - s <= RUN_MAX and order_bits(k0[np.uint64(s - 1)], kind, False, sign, ones, inf) == k:
            s -= 1
        for i in range(lo, hi):
            j = np.uint64(i)
            if i > lo:
                kn = order_bits(k0[j], kind, False, sign, ones, inf)
                if kn < k:
                    bad[c] = 1
                    break
                if kn != k:
                    k, s = kn, i
            if i - s > RUN_MAX:
                bad[c] = 1
                break
            w = u[j]
            w2 = u2[j] if two else _U0
            new = True
            for t in range(s, i):
                if u[np.uint64(t)] == w and (not two or u2[np.uint64(t)] == w2):
                    new = False
                    break
            keep[j] = new
