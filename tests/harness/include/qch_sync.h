// qch_sync.h: warp schedule, block barriers, warp rendezvous, block-shared memory.
// Part of qch_runtime.h; read the header comment there.
#pragma once

#include "qch_state.h"

namespace qch {

// ---- warp schedule -----------------------------------------------------------------------
// Why run warps one at a time: with free scheduling a missing barrier is caught only when the
// OS happens to run a reader before the writer. With warps run in order, each until its next
// barrier, a reader in an earlier warp always runs before the writer in a later one (and it
// reads poison), and a writer in an earlier warp always overwrites before a later warp reads.
// Launches alternate the order per block, so both kinds of hazard show up in a multi-block grid.
// Lanes of one warp still run concurrently as real threads.
inline unsigned warp_index() { return t.linear / kWarp; }

inline void pass_turn(BlockState& b) {  // under b.m: hand the block to the first unfinished warp
  if (!b.order) return;
  const unsigned nw = unsigned(b.warps.size());
  for (unsigned k = 0; k < nw; ++k) {
    unsigned w = b.order > 0 ? k : nw - 1 - k;
    if (b.warp_parked[w] < b.warp_live[w]) {
      b.turn = w;
      b.warps[w].go.notify();
      return;
    }
  }
}

inline void wait_for_turn() {
  BlockState& b = *t.block;
  const unsigned w = warp_index();
  wait(b.m, b.warps[w].go, [&] { return !b.order || b.turn == w; }, "its warp's turn", false);
}

// ---- block barrier (__syncthreads / threadgroup_barrier) ---------------------------------
inline void open_barrier(BlockState& b) {  // under b.m: every live thread has arrived
  b.arrived = 0;
  ++b.generation;
  std::fill(b.warp_parked.begin(), b.warp_parked.end(), 0u);
  if (b.order) pass_turn(b);
  else for (auto& w : b.warps) w.go.notify();
}

inline void block_barrier() {
  BlockState& b = *t.block;
  const unsigned w = warp_index();
  uint64_t gen;
  {
    std::lock_guard<std::mutex> g(b.m);
    gen = b.generation;
    ++b.warp_parked[w];
    if (++b.arrived == b.live) open_barrier(b);
    else if (b.order && b.turn == w && b.warp_parked[w] >= b.warp_live[w]) pass_turn(b);
  }
  wait(b.m, b.warps[w].go, [&] { return b.generation != gen && (!b.order || b.turn == w); },
       "a block barrier", !b.order);
}

// ---- warp rendezvous ---------------------------------------------------------------------
inline unsigned lane() { return t.linear % kWarp; }
inline Warp& my_warp() { return t.block->warps[t.linear / kWarp]; }

inline void complete_op(Warp& w) {  // under w.m: every participant has deposited
  const int buf = int(w.done % 2);
  w.participants[buf] = w.arrived;
  w.readers[buf] = __builtin_popcountll(w.arrived);
  w.arrived = 0;
  w.op = nullptr;
  ++w.done;
  w.changed.notify();
}

// Deposit (lo, hi) for this lane in the warp's pending operation `op`, wait until every
// participant has deposited, then copy all kWarp deposits out. mask == 0 means "every live lane".
// Returns the participating lanes; `out` receives the deposits (poison for other lanes).
inline LaneMask rendezvous(const char* op, LaneMask mask, uint64_t lo, uint64_t hi,
                           uint64_t out[kWarp][2]) {
  Warp& w = my_warp();
  const LaneMask me = bit(lane());
  char why[160] = "";
  uint64_t k;
  int buf;
  {
    std::unique_lock<std::mutex> lk(w.m);
    if (mask && !(mask & me)) snprintf(why, sizeof why, "%s: calling lane is not in its own mask", op);
    else if (mask & ~w.live)
      snprintf(why, sizeof why, "%s: mask names lanes that have exited or do not exist "
               "(mask 0x%08llx, live lanes 0x%08llx)", op, (unsigned long long)mask,
               (unsigned long long)w.live);
    k = w.done;
    buf = int(k % 2);
  }
  if (why[0]) fail(why);
  wait(w.m, w.changed, [&] { return w.readers[buf] == 0 || w.done != k; }, op);
  {
    std::unique_lock<std::mutex> lk(w.m);
    if (w.done != k)
      snprintf(why, sizeof why, "%s: overlapping warp operations with different masks are not modeled", op);
    else if (w.arrived != 0 && std::strcmp(w.op, op) != 0)
      snprintf(why, sizeof why, "divergent warp operations: %s while other lanes are in %s", op, w.op);
    else if (w.arrived != 0 && w.required != mask)
      snprintf(why, sizeof why, "%s: lanes of one warp passed different masks", op);
    if (!why[0]) {
      if (w.arrived == 0) { w.op = op; w.required = mask; }
      w.slot[buf][lane()][0] = lo;
      w.slot[buf][lane()][1] = hi;
      w.arrived |= me;
      LaneMask need = w.required ? w.required : w.live;
      if ((w.arrived & need) == need) complete_op(w);
    }
  }
  if (why[0]) fail(why);
  wait(w.m, w.changed, [&] { return w.done != k; }, op);
  std::lock_guard<std::mutex> g(w.m);
  LaneMask parts = w.participants[buf];
  for (unsigned i = 0; i < kWarp; ++i) {
    bool in = parts & bit(i);
    out[i][0] = in ? w.slot[buf][i][0] : ~uint64_t(0);
    out[i][1] = in ? w.slot[buf][i][1] : ~uint64_t(0);
  }
  if (--w.readers[buf] == 0) w.changed.notify();
  return parts;
}

// A lane returned from the kernel: it no longer counts for barriers and warp operations.
inline void exit_thread() {
  BlockState& b = *t.block;
  Warp& w = my_warp();
  const LaneMask me = bit(lane());
  std::string why;
  {
    std::lock_guard<std::mutex> g(w.m);
    w.live &= ~me;
    if (w.arrived && (w.required & me))
      why = std::string(w.op) + ": lane " + std::to_string(lane()) +
            " named in the mask returned from the kernel (" + where() + ")";
    else if (w.arrived && !w.required && (w.arrived & w.live) == w.live)
      complete_op(w);
  }
  if (!why.empty()) b.launch->fail(why);
  std::lock_guard<std::mutex> g(b.m);
  const unsigned wi = warp_index();
  --b.live;
  --b.warp_live[wi];
  if (b.arrived && b.arrived == b.live) open_barrier(b);
  else if (b.order && b.turn == wi && b.warp_parked[wi] >= b.warp_live[wi]) pass_turn(b);
}

// Values travel through the rendezvous as raw bytes (up to 16 per lane).
template <class T>
inline void to_bits(const T& v, uint64_t& lo, uint64_t& hi) {
  static_assert(sizeof(T) <= 16, "warp operations on values wider than 16 bytes");
  uint64_t tmp[2] = {0, 0};
  std::memcpy(tmp, &v, sizeof(T));
  lo = tmp[0];
  hi = tmp[1];
}
template <class T>
inline T from_bits(const uint64_t bits[2]) {
  T v;
  std::memcpy(&v, bits, sizeof(T));
  return v;
}

// Gather every participant's value of `v`: returns the participants' mask.
template <class T>
inline LaneMask gather(const char* op, LaneMask mask, const T& v, T out[kWarp]) {
  uint64_t lo, hi, raw[kWarp][2];
  to_bits(v, lo, hi);
  LaneMask parts = rendezvous(op, mask, lo, hi, raw);
  for (unsigned i = 0; i < kWarp; ++i) out[i] = from_bits<T>(raw[i]);
  return parts;
}

// The value lane `src` deposited (poison when src is inactive or outside the warp).
template <class T>
inline T shuffle_from(const char* op, LaneMask mask, const T& v, int src) {
  T all[kWarp];
  gather(op, mask, v, all);
  return src < 0 || src >= int(kWarp) ? all[lane()] : all[src];
}

// ---- block-shared memory -----------------------------------------------------------------
// Every thread allocates its shared arrays in the same order, so equal offsets give every
// thread of the block the same storage.
template <class T>
inline T& shared_object() {
  size_t align = alignof(T) < 16 ? 16 : alignof(T);
  size_t off = (t.arena_off + align - 1) / align * align;
  if (off + sizeof(T) > kArenaBytes) fail("shared memory arena exhausted (64 KiB)");
  t.arena_off = off + sizeof(T);
  return *reinterpret_cast<T*>(t.block->arena + off);
}
inline void* dynamic_shared() { return t.block->dynamic_shared.data(); }

}  // namespace qch
