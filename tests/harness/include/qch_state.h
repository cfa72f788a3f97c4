// qch_state.h: the harness device state (blocks, warps, thread context) and how threads wait.
// Part of qch_runtime.h; read the header comment there.
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
// Lanes per warp / SIMD group. CUDA warps are 32; Metal SIMD groups are 32 on Apple GPUs but
// 8 to 64 elsewhere, so Metal kernels are also run at other widths (runner.build(simd_width=)).
#ifndef QCH_SIMD_WIDTH
#define QCH_SIMD_WIDTH 32
#endif

namespace qch {

constexpr unsigned kWarp = QCH_SIMD_WIDTH;
static_assert(kWarp >= 4 && kWarp <= 64 && (kWarp & (kWarp - 1)) == 0,
              "QCH_SIMD_WIDTH must be a power of two from 4 to 64");
using LaneMask = uint64_t;  // one bit per lane (64-wide SIMD groups need all 64)
constexpr LaneMask bit(unsigned lane) { return LaneMask(1) << lane; }
constexpr LaneMask kAllLanes = kWarp == 64 ? ~LaneMask(0) : bit(kWarp) - 1;
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
  LaneMask live = 0;          // lanes that exist and have not returned
  LaneMask arrived = 0;       // lanes waiting in the pending operation
  LaneMask required = 0;      // CUDA: lanes named by the mask; 0 = every live lane (Metal)
  const char* op = nullptr;   // name of the pending operation (for divergence reports)
  uint64_t done = 0;          // completed operations
  // Double-buffered deposit slots: operation k uses slot[k % 2]. A buffer is refilled only
  // after every participant of the operation two back has copied its values out.
  uint64_t slot[2][kWarp][2] = {};
  LaneMask participants[2] = {0, 0};
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

}  // namespace qch
