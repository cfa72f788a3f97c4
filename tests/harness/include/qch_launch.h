// qch_launch.h: kernel argument binding, the thread pool and the launch loop.
// Part of qch_runtime.h; read the header comment there.
#pragma once

#include "qch_sync.h"

namespace qch {

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
      wp.live = lanes == kWarp ? kAllLanes : bit(lanes) - 1;
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
