"""A separate process that uses the kernel cache the way a backend will, for the cache tests.

    python tests/cache_worker.py '{"action": "binary", "source": "...", ...}'

prints one JSON line: where the kernel came from ("disk" or "compiled"), whether the result
is right, every CacheWarning raised, and the cache counters. The "compiler" of the binary
action is a pure function of (source, compiler, options), so a test can tell a right binary
from a wrong one; the "module" action goes through numba for real and the "opencl" action
through pocl for real. QC_GO_FILE (optional) names a file to wait for before starting, so
several workers can be released at once to race (each first writes QC_GO_FILE.ready.PID).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path


def wait_for_go() -> None:
    go = os.environ.get("QC_GO_FILE")
    if go:                               # tell the test this worker is ready to race
        Path(f"{go}.ready.{os.getpid()}").write_text("")
    deadline = time.monotonic() + 60
    while go and not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit("cache_worker: QC_GO_FILE never appeared")
        time.sleep(0.005)


def fake_compile(source: str, compiler: str, options) -> bytes:
    seed = json.dumps([source, compiler, list(options)]).encode()
    block = hashlib.sha256(seed).digest()
    return block * 64           # 2 KiB: big enough that a torn write would show


def binary(job, disk_cache) -> dict:
    key = disk_cache.make_key(backend=job.get("backend", "opencl"), compiler=job["compiler"],
                              device=job.get("device", "test-device"),
                              options=job.get("options", []), source=job["source"])
    payload = disk_cache.load(key)
    origin = "disk"
    if payload is None:
        origin = "compiled"
        time.sleep(job.get("compile_seconds", 0.0))
        payload = fake_compile(job["source"], job["compiler"], job.get("options", []))
        disk_cache.store(key, payload, source_suffix=".cl", kernel_names=["k"],
                         query=job.get("query", ""), dtypes=["float32"], compile_ms=1.0)
    right = payload == fake_compile(job["source"], job["compiler"], job.get("options", []))
    return {"origin": origin, "right": right, "key": key.digest}


MODULE_SOURCE = '''import numba


@numba.njit(cache=True)
def affine(x):
    return x * {scale} + 1
'''


def module(job, disk_cache) -> dict:
    from querycompute.cache import numba_identity
    compiler, device = numba_identity()
    source = MODULE_SOURCE.format(scale=job.get("scale", 3))
    key = disk_cache.make_key(backend="cpu", compiler=compiler, device=device, source=source)
    path = disk_cache.load_module(key)
    origin = "disk"
    if path is None:
        origin = "compiled"
        path = disk_cache.store_module(key, kernel_names=["affine"], dtypes=["int64"])
    mod = disk_cache.import_module(path, key)
    value = mod.affine(14)              # numba compiles (or loads its cache) here
    stats = mod.affine.stats
    if origin == "compiled" or stats.cache_misses:   # the documented protocol
        disk_cache.seal_module(key, compile_ms=1.0)
    return {"origin": origin, "right": value == 14 * job.get("scale", 3) + 1, "key": key.digest,
            "numba_hits": sum(stats.cache_hits.values()),
            "numba_misses": sum(stats.cache_misses.values()), "path": str(path)}


OPENCL_SOURCE = '''__kernel void affine(__global const float *x, __global float *y) {
    size_t i = get_global_id(0);
    y[i] = x[i] * 2.0f + 1.0f;
}
'''


def opencl(job, disk_cache) -> dict:
    import numpy as np
    import pyopencl as cl
    from querycompute.cache import opencl_identity
    from querycompute.backends.opencl.opencl_device import open_device
    dev = open_device()          # the device the library uses: one that compiles (probe)
    device, ctx = dev.device, dev.context
    compiler, device_id = opencl_identity(device)
    options = ["-cl-std=CL1.2"]
    key = disk_cache.make_key(backend="opencl", compiler=compiler, device=device_id,
                              options=options, source=OPENCL_SOURCE)
    payload = disk_cache.load(key)
    origin = "disk"
    if payload is None:
        origin = "compiled"
        program = cl.Program(ctx, OPENCL_SOURCE).build(options=options, devices=[device])
        payload = program.get_info(cl.program_info.BINARIES)[0]
        disk_cache.store(key, payload, source_suffix=".cl", kernel_names=["affine"])
    else:
        program = cl.Program(ctx, [device], [payload]).build(options=options)
    queue = cl.CommandQueue(ctx)
    x = np.arange(64, dtype=np.float32)
    mf = cl.mem_flags
    xb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(ctx, mf.WRITE_ONLY, x.nbytes)
    program.affine(queue, x.shape, None, xb, yb)
    y = np.empty_like(x)
    cl.enqueue_copy(queue, y, yb)
    return {"origin": origin, "right": bool((y == x * 2 + 1).all()), "key": key.digest}


def query(job, disk_cache) -> dict:
    """A real query through the library on job["backend"]: where its kernel came from."""
    import numpy as np

    import querycompute as qc
    x = np.arange(1000, dtype=np.float64)
    got = qc.query(x).on(job["backend"]).select(lambda v: v * 7 + 1).where(lambda v: v > 50).sum()
    trace = qc.last_trace()
    return {"origin": trace.kernels[0].cache, "right": bool(got == (x * 7 + 1)[x * 7 + 1 > 50].sum())}


def main() -> None:
    job = json.loads(sys.argv[1])
    from querycompute.cache import cache, disk_cache
    if job["action"] == "module":       # imports done before the race starts
        import numba  # noqa: F401
    elif job["action"] == "opencl":
        import pyopencl  # noqa: F401
    elif job["action"] == "query":      # the backend ready, so the race is the compile
        import querycompute as qc
        qc.backends()
    wait_for_go()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = {"binary": binary, "module": module, "opencl": opencl, "query": query}[job["action"]](
            job, disk_cache)
        if job.get("touch_again"):          # a second lookup in the same process
            result["second"] = {"binary": binary, "module": module}[job["action"]](job, disk_cache)
    result["warnings"] = [str(w.message) for w in caught
                          if w.category.__name__ == "CacheWarning"]
    result["stats"] = cache.stats().as_dict()
    print(json.dumps(result))


if __name__ == "__main__":
    main()


# ----- helpers the tests use to start workers ---------------------------------------------
def package_root() -> str:
    """The directory holding the querycompute the test process imported, so child
    processes import the very same code."""
    import querycompute.cache
    return str(Path(querycompute.cache.__file__).parents[2])


def child_env(cache_dir, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUERYCOMPUTE_")}
    env["QUERYCOMPUTE_CACHE_DIR"] = str(cache_dir)
    env["QUERYCOMPUTE_TIERED"] = "0"      # the first call compiles: what these tests look at
    env["PYTHONPATH"] = package_root()
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_worker(cache_dir, job: dict, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, json.dumps(job)],
                            env=child_env(cache_dir, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def result_of(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"cache worker failed ({proc.returncode}):\n{err}")
    return json.loads(out.strip().splitlines()[-1])


def run_worker(cache_dir, job: dict, **env) -> dict:
    return result_of(start_worker(cache_dir, job, **env))


_CLI = ("import argparse, sys\n"
        "from querycompute.cli.cache_commands import add_cache_commands\n"
        "parser = argparse.ArgumentParser(prog='querycompute')\n"
        "add_cache_commands(parser.add_subparsers(dest='command', required=True))\n"
        "args = parser.parse_args(sys.argv[1:])\n"
        "sys.exit(args.func(args))\n")


def run_cache_cli(cache_dir, *argv: str, **env) -> subprocess.CompletedProcess:
    """`querycompute cache ARGV...` in a fresh process, through add_cache_commands."""
    return subprocess.run([sys.executable, "-c", _CLI, "cache", *argv], text=True,
                          capture_output=True, env=child_env(cache_dir, **env), timeout=300)
