// qch_runtime.h: the CPU "device" the CUDA and Metal preludes run kernels on.
//
// What it models (and so what a test run through it can catch):
//  * Every thread of a block is a real std::thread (a persistent pool), so block barriers are
//    real barriers: a missing barrier lets threads read shared memory before it is written.
//  * Blocks run one after another; shared (threadgroup) memory is one arena per block, filled
//    with a poison byte (0xFF: NaN for floats, -1 for integers) before every block, so reading
//    a slot nobody wrote in this block shows up in the result.
//  * Warps / SIMD groups are kWarp consecutive threads of the block: 32, or QCH_SIMD_WIDTH
//    (a power of two, 4 to 64) for Metal builds at other widths. A warp operation is a real
//    rendezvous of the participating lanes; values read from an inactive lane (exited, or past
//    the end of a partial block) are poison. CUDA's mask must name only live lanes and every
//    lane it names must take part; Metal's SIMD-group functions act on the live lanes.
//    Lanes of one warp calling different warp operations at once is reported as an error.
//  * By default warps run one at a time, each until its next block barrier, ascending in
//    even blocks and descending in odd ones (see "warp schedule"), so a missing barrier gives
//    a wrong result on every run; launches may also ask for free scheduling.
//  * Atomics are real atomics (std::atomic_ref) on the host buffers.
//  * A wait that lasts longer than QCH_TIMEOUT_S (a barrier some threads never reach, a lane
//    that never arrives) fails the launch with a message instead of hanging.
// What it does not model: the GPU memory model's weak ordering (host x86 is TSO and every
// barrier here is sequentially consistent), independent warp scheduling and lock-step
// execution (lanes of a warp run freely between warp operations), bank conflicts, occupancy,
// the speed of anything, and concurrent blocks (a kernel that waits on a *later* block times
// out here, where a GPU might run it).
#pragma once

#include "qch_launch.h"
