// qch_runtime.h: the CPU "device" the CUDA and Metal preludes run kernels on.
//
// What it models (and so what a test run through it can catch):
//  * Every thread of a block is a real std::thread (a persistent pool), so block barriers are
//    real barriers: a missing barrier lets threads read shared memory before it is written.
//  * Blocks run one after another; shared (threadgroup) memory is one arena per block, filled
//    with a poison byte (0xFF: NaN for floats, -1 for integers) before every block, so reading
//    a slot nobody wrote in this block shows up in the result.
//  * Warps / SIMD groups are 32 consecutive threads of the block. A warp operation is a real
//    rendezvous of the participating lanes; values read from an inactive lane (exited, or past
//    the end of a partial block) are poison. CUDA's mask must name only live lanes and every
//    lane it names must take part; Metal's SIMD-group functions act on the live lanes.
//    Lanes of one warp calling different warp operations at once is reported as an error.
//  * Atomics are real atomics (std::atomic_ref) on the host buffers.
//  * A wait that lasts longer than QCH_TIMEOUT_S (a barrier some threads never reach, a lane
//    that never arrives) fails the launch with a message instead of hanging.
// What it does not model: the GPU memory model's weak ordering (host x86 is TSO and every
// barrier here is sequentially consistent), independent warp scheduling and lock-step
// execution (lanes of a warp run freely between warp operations), bank conflicts, occupancy,
// the speed of anything, and concurrent blocks (a kernel that waits on a *later* block hangs
// here, where a GPU might not).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <math.h>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#ifdef __linux__
#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// A waiting thread first yields a few times before it sleeps on a futex: with 256
// threads on a few cores the thread it waits for is usually runnable, and a yield hands it
// the core ~5x cheaper than a sleep/wake pair. Few, because every yielding thread counts
// as runnable and would crowd out other processes on a shared machine.
#ifndef QCH_SPINS
#define QCH_SPINS 4
#endif
#ifndef QCH_TIMEOUT_S
#define QCH_TIMEOUT_S 20
#endif

namespace qch {

constexpr unsigned kWarp = 32;
constexpr size_t kArenaBytes = 64 * 1024;
constexpr unsigned char kPoison = 0xFF;

struct Dim3 { unsigned x = 1, y = 1, z = 1; };

struct Abort {};  // thrown in a kernel thread to unwind it after the launch failed

using Clock = std::chrono::steady_clock;

// A futex word: state changes under a mutex, then `notify` bumps the word and wakes every
// sleeper; sleepers re-check their condition. Waiting never holds a lock, so waking 32 or
// 256 threads costs one context switch each, not a convoy on a mutex.
struct Signal {
  std::atomic<uint32_t> word{0};
  void notify() {
    word.fetch_add(1);
#ifdef __linux__
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
#endif
  }
  // Sleep while the word still equals `seen`, at most `ms` milliseconds.
  void sleep(uint32_t seen, int ms) {
#ifdef __linux__
    timespec ts{ms / 1000, (ms % 1000) * 1000000L};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
#else
    (void)ms;
    if (word.load() == seen) std::this_thread::sleep_for(std::chrono::microseconds(20));
#endif
  }
};

struct BlockState;

struct ThreadCtx {
  Dim3 tid, bid, bdim, gdim;
  unsigned linear = 0;       // index of the thread in its block
  size_t arena_off = 0;      // next shared allocation of this thread (same sequence in every thread)
  BlockState* block = nullptr;
};
inline thread_local ThreadCtx t;

struct Warp {
  std::mutex m;
  Signal changed;             // an operation completed or a deposit buffer was released
  Signal go;                  // a barrier opened or it became this warp's turn to run
  uint32_t live = 0;          // lanes that exist and have not returned
  uint32_t arrived = 0;       // lanes waiting in the pending operation
  uint32_t required = 0;      // CUDA: lanes named by the mask; 0 = every live lane (Metal)
  const char* op = nullptr;   // name of the pending operation (for divergence reports)
  uint64_t done = 0;          // completed operations
  // Double-buffered deposit slots: operation k uses slot[k % 2]. A buffer is refilled only
  // after every participant of the operation two back has copied its values out.
  uint64_t slot[2][kWarp][2] = {};
  uint32_t participants[2] = {0, 0};
  int readers[2] = {0, 0};
};

struct Launch;

struct BlockState {
  Launch* launch = nullptr;
  unsigned nthreads = 0;
  std::mutex m;
  unsigned live = 0, arrived = 0;
  uint64_t generation = 0;
  std::vector<Warp> warps;
  // Warp schedule (see run_in_order below): order 0 = every thread runs freely; +1 / -1 =
  // one warp at a time in ascending / descending order, each until all its live lanes are at
  // the next block barrier or gone.
  int order = 0;
  unsigned turn = 0;
  std::vector<unsigned> warp_live, warp_parked;
  alignas(64) unsigned char arena[kArenaBytes];
  std::vector<unsigned char> dynamic_shared;
};

struct Launch {
  std::atomic<bool> failed{false};
  std::mutex err_m;
  std::string error;
  BlockState* block = nullptr;
  void fail(const std::string& msg) {
    {
      std::lock_guard<std::mutex> g(err_m);
      if (error.empty()) error = msg;
    }
    failed = true;
    for (auto& w : block->warps) { w.changed.notify(); w.go.notify(); }
  }
};

inline std::string where() {
  return "block " + std::to_string(t.bid.x) + " thread " + std::to_string(t.linear);
}

[[noreturn]] inline void fail(const std::string& msg) {
  t.block->launch->fail(msg + " (" + where() + ")");
  throw Abort{};
}

// Wait until `ready()` (evaluated under `m`); fails the launch after QCH_TIMEOUT_S, and
// unwinds when another thread failed it, so a divergent barrier is a test failure with a
// message, not a hang.
template <class Ready>
inline void wait(std::mutex& m, Signal& s, Ready ready, const char* what, bool spin = true) {
  auto deadline = Clock::now() + std::chrono::seconds(QCH_TIMEOUT_S);
  Launch* L = t.block->launch;
  int spins = 0;
  for (;;) {
    uint32_t seen = s.word.load();
    {
      std::lock_guard<std::mutex> g(m);
      if (ready()) return;
    }
    if (L->failed) throw Abort{};
    if (Clock::now() > deadline)
      fail(std::string("deadlock: waited ") + std::to_string(QCH_TIMEOUT_S) + " s in " + what +
           " (a barrier or warp operation that not every thread reaches?)");
    if (spin && spins++ < QCH_SPINS) std::this_thread::yield(); else s.sleep(seen, 200);
  }
}

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
  w.readers[buf] = __builtin_popcount(w.arrived);
  w.arrived = 0;
  w.op = nullptr;
  ++w.done;
  w.changed.notify();
}

// Deposit (lo, hi) for this lane in the warp's pending operation `op`, wait until every
// participant has deposited, then copy all 32 deposits out. mask == 0 means "every live lane".
// Returns the participating lanes; `out` receives the deposits (poison for other lanes).
inline uint32_t rendezvous(const char* op, uint32_t mask, uint64_t lo, uint64_t hi,
                           uint64_t out[kWarp][2]) {
  Warp& w = my_warp();
  const uint32_t me = 1u << lane();
  char why[160] = "";
  uint64_t k;
  int buf;
  {
    std::unique_lock<std::mutex> lk(w.m);
    if (mask && !(mask & me)) snprintf(why, sizeof why, "%s: calling lane is not in its own mask", op);
    else if (mask & ~w.live)
      snprintf(why, sizeof why, "%s: mask names lanes that have exited or do not exist "
               "(mask 0x%08x, live lanes 0x%08x)", op, mask, w.live);
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
      uint32_t need = w.required ? w.required : w.live;
      if ((w.arrived & need) == need) complete_op(w);
    }
  }
  if (why[0]) fail(why);
  wait(w.m, w.changed, [&] { return w.done != k; }, op);
  std::lock_guard<std::mutex> g(w.m);
  uint32_t parts = w.participants[buf];
  for (unsigned i = 0; i < kWarp; ++i) {
    bool in = parts & (1u << i);
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
  const uint32_t me = 1u << lane();
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
inline uint32_t gather(const char* op, uint32_t mask, const T& v, T out[kWarp]) {
  uint64_t lo, hi, raw[kWarp][2];
  to_bits(v, lo, hi);
  uint32_t parts = rendezvous(op, mask, lo, hi, raw);
  for (unsigned i = 0; i < kWarp; ++i) out[i] = from_bits<T>(raw[i]);
  return parts;
}

// The value lane `src` deposited (poison when src is inactive or outside the warp).
template <class T>
inline T shuffle_from(const char* op, uint32_t mask, const T& v, int src, bool keep_own_outside) {
  T all[kWarp];
  gather(op, mask, v, all);
  if (src < 0 || src >= int(kWarp)) return keep_own_outside ? v : all[lane()];
  return all[src];
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

// ---- kernel argument binding -------------------------------------------------------------
// Arguments arrive CUDA-style: args[i] points at the value of parameter i (for a pointer
// parameter: at the pointer). `describe` tells Python each parameter's kind and size so it
// can check and convert what the test passes.
enum ArgKind { kPointer = 1, kReference = 2, kInt = 3, kUInt = 4, kFloat = 5, kBool = 6, kOther = 7 };

template <class A>
inline void describe_one(int* d) {
  using R = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (std::is_pointer_v<A>) {
    using P = std::remove_cv_t<std::remove_pointer_t<A>>;
    d[0] = kPointer;
    if constexpr (std::is_void_v<P>) d[1] = 0; else d[1] = int(sizeof(P));
  } else if constexpr (std::is_reference_v<A>) {
    d[0] = kReference;
    d[1] = int(sizeof(R));
  } else if constexpr (std::is_same_v<R, bool>) {
    d[0] = kBool; d[1] = 1;
  } else if constexpr (std::is_floating_point_v<R> || std::is_same_v<R, _Float16>) {
    d[0] = kFloat; d[1] = int(sizeof(R));
  } else if constexpr (std::is_integral_v<R>) {
    d[0] = std::is_signed_v<R> ? kInt : kUInt; d[1] = int(sizeof(R));
  } else {
    d[0] = kOther; d[1] = int(sizeof(R));
  }
}

template <class... A>
inline int describe(void (*)(A...), int* desc, int max) {
  int n = int(sizeof...(A));
  if (n * 2 > max) return -1;
  int i = 0;
  ((describe_one<A>(desc + 2 * i), ++i), ...);
  return n;
}

template <class A>
inline A bind(void* p) {
  using R = std::remove_cv_t<std::remove_reference_t<A>>;
  return *static_cast<R*>(p);
}

template <class... A, size_t... I>
inline void call(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
  kernel(bind<A>(args[I])...);
}

// ---- the thread pool and the launch loop -------------------------------------------------
// Every worker takes part in every job (the extra ones just acknowledge it), so `want` and
// `body` are only written while no worker can be reading them.
struct Pool {
  Signal start, finished;
  std::atomic<unsigned> done{0};
  unsigned want = 0;
  std::function<void(unsigned)> body;
  unsigned size = 0;

  void grow(unsigned n) {
    while (size < n) {
      unsigned idx = size++;
      uint32_t seen = start.word.load();
      std::thread([this, idx, seen] { worker(idx, seen); }).detach();  // lives until exit
    }
  }
  void worker(unsigned idx, uint32_t seen) {
    for (;;) {
      while (start.word.load() == seen) start.sleep(seen, 1000);
      seen = start.word.load();
      if (idx < want) body(idx);
      if (done.fetch_add(1) + 1 == size) finished.notify();
    }
  }
  void run(unsigned n, std::function<void(unsigned)> f) {
    grow(n);
    body = std::move(f);
    want = n;
    done = 0;
    uint32_t seen = finished.word.load();
    start.notify();
    while (done.load() != size) {
      finished.sleep(seen, 1000);
      seen = finished.word.load();
    }
  }
};

inline Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: detached workers may outlive static teardown
  return *p;
}

inline Dim3 unflatten(unsigned i, Dim3 d) { return Dim3{i % d.x, (i / d.x) % d.y, i / (d.x * d.y)}; }

// Run `kernel(args...)` over grid x block. Returns 0, or 1 with a message in err.
// schedule: 0 free, 1 / -1 warps in ascending / descending order, 2 alternate per block.
template <class... A>
inline int launch(void (*kernel)(A...), const unsigned* g, const unsigned* bl, void** args,
                  size_t dynamic_shared_bytes, int schedule, char* err, size_t errlen) {
  static std::mutex one_launch_at_a_time;  // the pool runs one block at a time
  std::lock_guard<std::mutex> guard(one_launch_at_a_time);
  Dim3 grid{g[0], g[1], g[2]}, block{bl[0], bl[1], bl[2]};
  const unsigned nthreads = block.x * block.y * block.z;
  const unsigned nblocks = grid.x * grid.y * grid.z;
  auto L = std::make_unique<Launch>();
  auto B = std::make_unique<BlockState>();
  if (nthreads == 0 || nthreads > 1024) {
    snprintf(err, errlen, "block of %u threads: must be 1..1024", nthreads);
    return 1;
  }
  B->launch = L.get();
  B->nthreads = nthreads;
  B->warps = std::vector<Warp>((nthreads + kWarp - 1) / kWarp);
  B->dynamic_shared.assign(dynamic_shared_bytes ? dynamic_shared_bytes : 1, kPoison);
  L->block = B.get();
  for (unsigned b = 0; b < nblocks && !L->failed; ++b) {
    B->live = nthreads;
    B->arrived = 0;
    B->order = schedule == 2 ? (b % 2 ? -1 : 1) : schedule;
    B->warp_parked.assign(B->warps.size(), 0u);
    B->warp_live.assign(B->warps.size(), 0u);
    for (unsigned w = 0; w < B->warps.size(); ++w) {
      Warp& wp = B->warps[w];
      unsigned lanes = std::min(kWarp, nthreads - w * kWarp);
      wp.live = lanes == 32 ? 0xFFFFFFFFu : ((1u << lanes) - 1);
      B->warp_live[w] = lanes;
      wp.arrived = wp.required = 0;
      wp.op = nullptr;
      wp.readers[0] = wp.readers[1] = 0;
    }
    pass_turn(*B);
    std::memset(B->arena, kPoison, kArenaBytes);
    std::fill(B->dynamic_shared.begin(), B->dynamic_shared.end(), kPoison);
    Dim3 bid = unflatten(b, grid);
    BlockState* bs = B.get();
    pool().run(nthreads, [&, bid, bs](unsigned i) {
      t = ThreadCtx{};
      t.tid = unflatten(i, block);
      t.bid = bid;
      t.bdim = block;
      t.gdim = grid;
      t.linear = i;
      t.block = bs;
      try {
        wait_for_turn();
        call(kernel, args, std::index_sequence_for<A...>{});
      } catch (Abort&) {
      } catch (std::exception& e) {
        bs->launch->fail(std::string("C++ exception in kernel: ") + e.what());
      }
      exit_thread();
    });
  }
  if (L->failed) {
    snprintf(err, errlen, "%s", L->error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace qch
