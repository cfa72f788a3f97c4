"""The CPU harness itself: hand-written CUDA C and MSL kernels that use exactly the constructs
the GPU printers emit, run on real threads; and deliberately broken kernels (a removed
barrier, a wrong shuffle offset, a lane that left before a full-mask shuffle, divergent warp
operations, a barrier not every thread reaches) that the harness must catch."""
from __future__ import annotations

import numpy as np
import pytest

from harness import runner
from harness.runner import HarnessError

pytestmark = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])

# A block sum the way the CUDA printer writes it: warp shuffles, one shared slot per warp,
# a barrier, then warp 0 folds the 8 warp sums. BARRIER and OFFSET are the knobs the broken
# variants turn.
CUDA_BLOCK_SUM = r"""
extern "C" __global__ void __launch_bounds__(256) block_sum(
        const int* __restrict__ x, long long n, long long* __restrict__ partials) {
    __shared__ long long sh[8];
    long long acc = 0LL;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc += x[i];
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, OFFSET);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = acc;
    BARRIER;
    if ((threadIdx.x >> 5) == 0) {
        acc = (threadIdx.x & 31) < 8 ? sh[threadIdx.x & 31] : 0LL;
        for (int offset = 4; offset > 0; offset >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, OFFSET);
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}
"""

METAL_BLOCK_SUM = r"""
#include <metal_stdlib>
using namespace metal;
kernel void block_sum(device const int* x [[buffer(0)]], constant long& n [[buffer(1)]],
                      device long* partials [[buffer(2)]],
                      uint lid [[thread_position_in_threadgroup]],
                      uint group [[threadgroup_position_in_grid]],
                      uint lsize [[threads_per_threadgroup]],
                      uint ngroups [[threadgroups_per_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint simd [[simdgroup_index_in_threadgroup]]) {
    threadgroup long sh[8];
    long acc = 0;
    for (long i = long(group) * lsize + lid; i < n; i += long(ngroups) * lsize) acc += x[i];
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += simd_shuffle_down(acc, (ushort)(OFFSET));
    if (lane == 0) sh[simd] = acc;
    BARRIER;
    if (simd == 0) {
        acc = lane < 8 ? sh[lane] : 0;
        acc = simd_sum(acc);
    }
    if (lid == 0) partials[group] = acc;
}
"""
GOOD = {"cuda": ("__syncthreads()", "offset"),
        "metal": ("threadgroup_barrier(mem_flags::mem_threadgroup)", "offset")}
SOURCES = {"cuda": CUDA_BLOCK_SUM, "metal": METAL_BLOCK_SUM}


def block_sum_source(dialect: str, barrier: str | None = None, offset: str | None = None) -> str:
    good_barrier, good_offset = GOOD[dialect]
    return (SOURCES[dialect].replace("BARRIER", barrier if barrier is not None else good_barrier)
            .replace("OFFSET", offset or good_offset))


def run_block_sum(source: str, dialect: str, x: np.ndarray, grid: int) -> np.ndarray:
    partials = np.zeros(grid, np.int64)
    runner.build(source, dialect).kernel("block_sum").launch(grid, 256, [x, np.int64(len(x)), partials])
    return partials


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(7).integers(-1000, 1000, 20_000).astype(np.int32)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@pytest.mark.parametrize("n,grid", [(0, 1), (1, 1), (33, 1), (1000, 3), (20_000, 16)])
def test_block_sum_matches_numpy(dialect, n, grid, data):
    partials = run_block_sum(block_sum_source(dialect), dialect, data[:n], grid)
    assert partials.sum() == data[:n].sum(dtype=np.int64)
    # each block's partial is exactly the sum of its grid-stride elements
    idx = np.arange(n)
    for b in range(grid):
        assert partials[b] == data[:n][(idx // 256) % grid == b].sum(dtype=np.int64)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_removed_barrier_is_caught(dialect, data):
    """Without the barrier warp 0 reads warp sums other warps have not written yet: the
    per-block arena is poisoned (-1 bytes), so the partials come out wrong."""
    broken = block_sum_source(dialect, barrier="")
    good = run_block_sum(block_sum_source(dialect), dialect, data, 16)
    bad = run_block_sum(broken, dialect, data, 16)
    assert not np.array_equal(bad, good)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_wrong_shuffle_offset_is_caught(dialect, data):
    """offset + 1 instead of offset: lanes read the wrong partner (and the upper lanes keep
    their own value, as hardware does), so warp sums double-count some lanes."""
    bad = run_block_sum(block_sum_source(dialect, offset="offset + 1"), dialect, data, 16)
    assert bad.sum() != data.sum(dtype=np.int64)


EARLY_EXIT = r"""
extern "C" __global__ void early_exit(const float* x, long long n, float* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                       // lanes past n leave ...
    float v = x[i] + __shfl_down_sync(0xffffffffu, x[i], 1);   // ... but the mask names them
    out[i] = v;
}
"""


def test_full_mask_shuffle_after_early_exit_is_reported():
    x = np.ones(40, np.float32)
    out = np.zeros(40, np.float32)
    with pytest.raises(HarnessError, match="exited|returned"):
        runner.build(EARLY_EXIT, "cuda").kernel("early_exit").launch(1, 64, [x, np.int64(40), out])


def test_early_exit_before_a_warp_op_is_fine_when_whole_warps_leave():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    runner.build(EARLY_EXIT, "cuda").kernel("early_exit").launch(1, 96, [x, np.int64(64), out])
    expected = x + np.where(np.arange(64) % 32 == 31, x, np.roll(x, -1))
    np.testing.assert_array_equal(out, expected)


DIVERGENT = r"""
extern "C" __global__ void divergent(int* out) {
    int v;
    if ((threadIdx.x & 31) < 16) v = (int)__ballot_sync(0xffffffffu, 1);
    else v = __shfl_down_sync(0xffffffffu, 1, 1);
    out[threadIdx.x] = v;
}
"""


def test_divergent_warp_operations_are_reported():
    out = np.zeros(32, np.int32)
    with pytest.raises(HarnessError, match="divergent warp operations"):
        runner.build(DIVERGENT, "cuda").kernel("divergent").launch(1, 32, [out])


DEADLOCK = r"""
extern "C" __global__ void deadlock(int* out) {
    int v = 0;
    if (threadIdx.x == 0) __syncthreads();                        // lane 0 waits for the block
    else v = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);  // its warp waits for lane 0
    out[threadIdx.x] = v;
}
"""


def test_barrier_not_every_thread_reaches_fails_instead_of_hanging():
    out = np.zeros(64, np.int32)
    module = runner.build(DEADLOCK, "cuda", defines={"QCH_TIMEOUT_S": 1})
    with pytest.raises(HarnessError, match="deadlock"):
        module.kernel("deadlock").launch(1, 64, [out])


SHARED_PER_BLOCK = r"""
extern "C" __global__ void shared_per_block(unsigned int* out, unsigned int* seen_before) {
    __shared__ unsigned int slot[256];
    __shared__ unsigned int flag;
    if (threadIdx.x == 0) seen_before[blockIdx.x] = flag;  // poison: not carried between blocks
    __syncthreads();
    slot[threadIdx.x] = blockIdx.x * 1000u + threadIdx.x;
    if (threadIdx.x == 0) flag = blockIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = slot[blockDim.x - 1 - threadIdx.x] + flag;
    atomicAdd(&out[gridDim.x * blockDim.x], 1u);
}
"""


def test_shared_memory_is_per_block_and_atomics_are_real():
    grid, block = 5, 256
    out = np.zeros(grid * block + 1, np.uint32)
    seen = np.zeros(grid, np.uint32)
    runner.build(SHARED_PER_BLOCK, "cuda").kernel("shared_per_block").launch(grid, block, [out, seen])
    b, t = np.divmod(np.arange(grid * block), block)
    np.testing.assert_array_equal(out[:-1], b * 1000 + (block - 1 - t) + b)
    assert out[-1] == grid * block
    assert (seen == 0xFFFFFFFF).all()


METAL_SIMD = r"""
#include <metal_stdlib>
using namespace metal;
kernel void simd_ops(device const float* x [[buffer(0)]], device float* prefix [[buffer(1)]],
                     device uint* votes [[buffer(2)]], device float* xored [[buffer(3)]],
                     uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]],
                     uint simd [[simdgroup_index_in_threadgroup]]) {
    float v = x[gid];
    prefix[gid] = simd_prefix_exclusive_sum(v);
    simd_vote vote = simd_ballot(v > 2.0f);
    if (lane == 0) votes[gid / 32] = (uint)((simd_vote::vote_t)vote);
    xored[gid] = simd_shuffle_xor(v, (ushort)1) + simd_max(v) * 0.0f;
}
"""


def test_metal_simd_group_functions_follow_lane_order():
    x = np.random.default_rng(3).integers(0, 5, 64).astype(np.float32)
    prefix, xored = np.zeros(64, np.float32), np.zeros(64, np.float32)
    votes = np.zeros(2, np.uint32)
    runner.build(METAL_SIMD, "metal").kernel("simd_ops").launch(1, 64, [x, prefix, votes, xored])
    for w in range(2):
        seg = x[32 * w:32 * w + 32]
        np.testing.assert_array_equal(prefix[32 * w:32 * w + 32], np.concatenate([[0], np.cumsum(seg)[:-1]]))
        assert votes[w] == sum(1 << i for i in range(32) if seg[i] > 2)
    np.testing.assert_array_equal(xored, x[np.arange(64) ^ 1])


CUDA_WIDE = r"""
extern "C" __global__ void wide(const float* __restrict__ x, long long n, float* __restrict__ out) {
    long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n) {
        float4 v = reinterpret_cast<const float4*>(x)[i / 4];
        reinterpret_cast<float4*>(out)[i / 4] = make_float4(v.w, v.z, v.y, v.x);
    }
}
"""


def test_vector_types_load_sixteen_bytes():
    x = np.arange(2048, dtype=np.float32)
    out = np.zeros_like(x)
    runner.build(CUDA_WIDE, "cuda").kernel("wide").launch(2, 256, [x, np.int64(len(x)), out])
    np.testing.assert_array_equal(out, x.reshape(-1, 4)[:, ::-1].ravel())


def test_bad_arguments_are_named():
    kernel = runner.build(block_sum_source("cuda"), "cuda").kernel("block_sum")
    with pytest.raises(TypeError, match="takes 3 arguments"):
        kernel.launch(1, 256, [np.zeros(4, np.int32)])
    with pytest.raises(TypeError, match="argument 1 is int64, got a numpy int32"):
        kernel.launch(1, 256, [np.zeros(4, np.int32), np.int32(4), np.zeros(1, np.int64)])


def test_compile_errors_show_the_translation_unit():
    with pytest.raises(HarnessError, match=r"could not compile(.|\n)*\| extern"):
        runner.build('extern "C" __global__ void broken(int* x) { x[0] = ; }', "cuda")
