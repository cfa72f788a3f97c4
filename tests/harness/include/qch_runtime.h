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
#include <condition_variable>
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

#ifndef QCH_TIMEOUT_S
#define QCH_TIMEOUT_S 20
#endif

namespace qch {

constexpr unsigned kWarp = 32;
constexpr size_t kArenaBytes = 64 * 1024;
constexpr unsigned char kPoison = 0xFF;

struct Dim3 { unsigned x = 1, y = 1, z = 1; };

struct Abort {};  // thrown in a kernel thread to unwind it after the launch failed

struct BlockState;

struct ThreadCtx {
  Dim3 tid, bid, bdim, gdim;
  unsigned linear = 0;       // index of the thread in its block
  size_t arena_off = 0;      // next shared allocation of this thread (same sequence in every thread)
  BlockState* block = nullptr;
};
inline thread_local ThreadCtx t;

using Clock = std::chrono::steady_clock;

struct Warp {
  std::mutex m;
  std::condition_variable cv;
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
  std::condition_variable cv;
  unsigned live = 0, arrived = 0;
  uint64_t generation = 0;
  std::vector<Warp> warps;
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
    if (block) {
      { std::lock_guard<std::mutex> g(block->m); }
      block->cv.notify_all();
      for (auto& w : block->warps) {
        { std::lock_guard<std::mutex> g(w.m); }
        w.cv.notify_all();
      }
    }
  }
};

inline std::string where() {
  return "block " + std::to_string(t.bid.x) + " thread " + std::to_string(t.linear);
}

[[noreturn]] inline void fail(const std::string& msg) {
  t.block->launch->fail(msg + " (" + where() + ")");
  throw Abort{};
}

// Wait on `cv` until `ready()`; fails the launch after QCH_TIMEOUT_S or when another thread
// failed it, so a divergent barrier is a test failure with a message, not a hang.
template <class Ready>
inline void wait(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, Ready ready,
                 const char* what) {
  auto deadline = Clock::now() + std::chrono::seconds(QCH_TIMEOUT_S);
  Launch* L = t.block->launch;
  while (!ready()) {
    if (L->failed) throw Abort{};
    if (cv.wait_until(lk, deadline) == std::cv_status::timeout && !ready()) {
      lk.unlock();
      fail(std::string("deadlock: waited ") + std::to_string(QCH_TIMEOUT_S) + " s in " + what +
           " (a barrier or warp operation that not every thread reaches?)");
    }
  }
}

// ---- block barrier (__syncthreads / threadgroup_barrier) ---------------------------------
inline void block_barrier() {
  BlockState& b = *t.block;
  std::unique_lock<std::mutex> lk(b.m);
  uint64_t gen = b.generation;
  if (++b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    b.cv.notify_all();
    return;
  }
  wait(lk, b.cv, [&] { return b.generation != gen; }, "a block barrier");
}

// ---- warp rendezvous ---------------------------------------------------------------------
inline unsigned lane() { return t.linear % kWarp; }
inline Warp& my_warp() { return t.block->warps[t.linear / kWarp]; }

// Deposit (lo, hi) for this lane in the warp's pending operation `op`, wait until every
// participant has deposited, then copy all 32 deposits out. mask == 0 means "every live lane".
// Returns the participating lanes; `out` receives the deposits (poison for other lanes).
inline uint32_t rendezvous(const char* op, uint32_t mask, uint64_t lo, uint64_t hi,
                           uint64_t out[kWarp][2]) {
  Warp& w = my_warp();
  const uint32_t me = 1u << lane();
  std::unique_lock<std::mutex> lk(w.m);
  if (mask) {
    if (!(mask & me)) { lk.unlock(); fail(std::string(op) + ": calling lane is not in its own mask"); }
    if (mask & ~w.live) {
      lk.unlock();
      char s[96];
      snprintf(s, sizeof s, "mask 0x%08x, live lanes 0x%08x", mask, w.live);
      fail(std::string(op) + ": mask names lanes that have exited or do not exist (" + s + ")");
    }
  }
  const uint64_t k = w.done;
  const int buf = int(k % 2);
  wait(lk, w.cv, [&] { return w.readers[buf] == 0; }, op);
  if (w.done != k) { lk.unlock(); fail(std::string(op) + ": overlapping warp operations with different masks are not modeled"); }
  if (w.arrived == 0) {
    w.op = op;
    w.required = mask;
  } else if (w.op != op && std::strcmp(w.op, op) != 0) {
    lk.unlock();
    fail(std::string("divergent warp operations: ") + op + " while other lanes are in " + w.op);
  } else if (w.required != mask) {
    lk.unlock();
    fail(std::string(op) + ": lanes of one warp passed different masks");
  }
  w.slot[buf][lane()][0] = lo;
  w.slot[buf][lane()][1] = hi;
  w.arrived |= me;
  auto complete = [&] {
    uint32_t need = w.required ? w.required : w.live;
    return (w.arrived & need) == need;
  };
  if (complete()) {
    w.participants[buf] = w.arrived;
    w.readers[buf] = __builtin_popcount(w.arrived);
    w.arrived = 0;
    w.op = nullptr;
    ++w.done;
    w.cv.notify_all();
  } else {
    wait(lk, w.cv, [&] { return w.done != k; }, op);
  }
  uint32_t parts = w.participants[buf];
  for (unsigned i = 0; i < kWarp; ++i) {
    bool in = parts & (1u << i);
    out[i][0] = in ? w.slot[buf][i][0] : ~uint64_t(0);
    out[i][1] = in ? w.slot[buf][i][1] : ~uint64_t(0);
  }
  if (--w.readers[buf] == 0) w.cv.notify_all();
  return parts;
}

// A lane returned from the kernel: it no longer counts for barriers and warp operations.
inline void exit_thread() {
  BlockState& b = *t.block;
  {
    Warp& w = my_warp();
    std::unique_lock<std::mutex> lk(w.m);
    const uint32_t me = 1u << lane();
    w.live &= ~me;
    if (w.arrived && w.required & me) {
      lk.unlock();
      b.launch->fail(std::string(w.op) + ": lane " + std::to_string(lane()) +
                     " named in the mask returned from the kernel (" + where() + ")");
      return;
    }
    if (w.arrived && (w.arrived & w.live) == w.live && !w.required) {
      const int buf = int(w.done % 2);
      w.participants[buf] = w.arrived;
      w.readers[buf] = __builtin_popcount(w.arrived);
      w.arrived = 0;
      w.op = nullptr;
      ++w.done;
      w.cv.notify_all();
    }
  }
  std::lock_guard<std::mutex> g(b.m);
  --b.live;
  if (b.arrived && b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    b.cv.notify_all();
  }
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
struct Pool {
  std::mutex m;
  std::condition_variable start, finished;
  uint64_t job = 0;
  unsigned want = 0, done = 0;
  std::function<void(unsigned)> body;
  unsigned size = 0;

  void grow(unsigned n) {
    while (size < n) {
      unsigned idx = size++;
      std::thread([this, idx] { worker(idx); }).detach();  // lives until the process exits
    }
  }
  void worker(unsigned idx) {
    uint64_t seen = 0;
    for (;;) {
      std::function<void(unsigned)> f;
      {
        std::unique_lock<std::mutex> lk(m);
        start.wait(lk, [&] { return job != seen; });
        seen = job;
        if (idx >= want) continue;
        f = body;
      }
      f(idx);
      std::lock_guard<std::mutex> g(m);
      if (++done == want) finished.notify_all();
    }
  }
  void run(unsigned n, std::function<void(unsigned)> f) {
    grow(n);
    std::unique_lock<std::mutex> lk(m);
    body = std::move(f);
    want = n;
    done = 0;
    ++job;
    start.notify_all();
    finished.wait(lk, [&] { return done == want; });
  }
};

inline Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: detached workers may outlive static teardown
  return *p;
}

inline Dim3 unflatten(unsigned i, Dim3 d) { return Dim3{i % d.x, (i / d.x) % d.y, i / (d.x * d.y)}; }

// Run `kernel(args...)` over grid x block. Returns 0, or 1 with a message in err.
template <class... A>
inline int launch(void (*kernel)(A...), const unsigned* g, const unsigned* bl, void** args,
                  size_t dynamic_shared_bytes, char* err, size_t errlen) {
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
    for (unsigned w = 0; w < B->warps.size(); ++w) {
      Warp& wp = B->warps[w];
      unsigned lanes = std::min(kWarp, nthreads - w * kWarp);
      wp.live = lanes == 32 ? 0xFFFFFFFFu : ((1u << lanes) - 1);
      wp.arrived = wp.required = 0;
      wp.op = nullptr;
      wp.readers[0] = wp.readers[1] = 0;
    }
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
