"""Issue 26 item 2 and issue 31 items 6-8: whatever is found in the cache directory (metadata
nested too deep, a FIFO or a directory where a file belongs, an entry removed by a prune in
another process between lookup and load, a full disk) is a miss or a warning, never an error
or a hang; a damaged entry is repaired by the next compile.

Every query runs in a fresh process (tests/cache_worker.py's environment, tiering off unless
asked) with a timeout, so a regression that blocks fails the test instead of hanging the suite.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cache_worker import child_env

TIMEOUT = 240            # seconds for one query process (numba's import and compile included)

# One cpu query in a fresh process, with the lambdas in a file (querycompute reads them from
# source). argv: mode n. Modes:
#   plain    run the query, synchronously compiled
#   tiered   compile it tiered (the numpy tier answers, numba compiles in the background),
#            wait for the compile, run it again: the second run's tier is "kernel" if it took over
#   vanish   as `querycompute cache prune --max-size 0` in another process would, remove
#            every entry right after the backend's disk lookup found this one
SCRIPT = r'''
import json, sys, warnings
import numpy as np
import querycompute as qc
from querycompute.cache import disk_cache

mode, n = sys.argv[1], int(sys.argv[2])
if mode == "vanish":
    lookup = disk_cache.load_module

    def lookup_then_prune(key):
        found = lookup(key)
        if found is not None:
            qc.cache.prune(0)
        return found
    disk_cache.load_module = lookup_then_prune
x = np.arange(n, dtype=np.float32)
want = float((x * 2)[x * 2 > 100].sum(dtype=np.float32))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    q = qc.query(x).on("cpu").select(lambda v: v * 2).where(lambda v: v > 100)
    if mode == "tiered":
        cq = q.compile("sum", tiered=True)
        first = float(cq())
        assert cq.wait(timeout=200)
        got = float(cq())
        tier, kernels = cq.tier, cq.trace.kernels
    else:
        got, first = float(q.sum()), None
        tier, kernels = "kernel", qc.last_trace().kernels
print(json.dumps({
    "right": got == want and first in (None, want), "tier": tier,
    "kernels": [{"dialect": k.dialect, "cache": k.cache} for k in kernels],
    "cache_warnings": [str(w.message) for w in caught if w.category.__name__ == "CacheWarning"],
    "other_warnings": [str(w.message) for w in caught if w.category.__name__ != "CacheWarning"],
    "stats": qc.cache.stats().as_dict()}))
'''


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("script") / "cache_fault_query.py"
    path.write_text(SCRIPT)
    return path


def run_query(script, cache_dir, mode="plain", n=1000, **env) -> dict:
    # the cpu backend's numba route: a module entry with numba's own files beside it, the
    # kind with the most to go wrong (the llvm route's entries are one binary, like
    # OpenCL's: test_cache_backends damages those)
    env = {"QUERYCOMPUTE_CPU_LLVM": "0", **env}
    try:
        done = subprocess.run([sys.executable, str(script), mode, str(n)], text=True,
                              capture_output=True, env=child_env(cache_dir, **env),
                              cwd=script.parent, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the query did not finish in {TIMEOUT} s: reading the cache blocked")
    assert done.returncode == 0, f"the query failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_cli(cache_dir, *argv: str) -> dict:
    """`querycompute cache ARGV... --json` in a fresh process (from a neutral directory, so it
    imports the package this test imported): its JSON."""
    try:
        done = subprocess.run([sys.executable, "-m", "querycompute", "cache", *argv, "--json"],
                              text=True, capture_output=True, env=child_env(cache_dir),
                              cwd=cache_dir.parent, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`querycompute cache {' '.join(argv)}` blocked")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def only_entry(cache_dir: Path) -> Path:
    (entry,) = [p for p in (cache_dir / "v1").iterdir() if not p.name.startswith(".")]
    return entry


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, script):
    """A cache holding the query's sealed cpu entry; tests damage copies of it."""
    cache = tmp_path_factory.mktemp("pristine") / "cache"
    first = run_query(script, cache)
    assert first["right"] and first["kernels"][0]["cache"] == "compiled"
    assert run_query(script, cache)["kernels"][0]["cache"] == "disk"
    return cache


@pytest.fixture
def cache(tmp_path, pristine):
    copy = tmp_path / "cache"
    # copy2 keeps mtimes, which numba keys its own index on
    shutil.copytree(pristine, copy, copy_function=shutil.copy2)
    return copy


def recompiled_once_then_hit(script, cache, damage_words: str) -> None:
    """The damaged entry is one warning naming the damage and a compile; the rewritten entry
    serves the next process from disk, quietly."""
    second = run_query(script, cache)
    assert second["right"] and second["kernels"][0]["cache"] == "compiled"
    (warning,) = second["cache_warnings"]
    assert "damaged" in warning and damage_words in warning
    third = run_query(script, cache)
    assert third["right"] and third["kernels"][0]["cache"] == "disk"
    assert third["cache_warnings"] == []


def nest(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_metadata_nested_too_deep_is_a_miss_and_cache_list_still_works(script, cache):
    meta = only_entry(cache) / "meta.json"
    meta.write_text(nest(100_000))

    assert run_cli(cache, "list")["entries"] == []
    assert run_cli(cache, "stats")["incomplete"] == 1

    recompiled_once_then_hit(script, cache, "nested too deep")
    assert json.loads(meta.read_text())["kind"] == "module"


def test_metadata_nested_inside_an_object_is_damage_in_process(tmp_path):
    # the same through the library's own API (no subprocess): a binary entry
    from querycompute.cache import CacheAPI, CacheWarning, DiskCache, make_key
    store = DiskCache(tmp_path / "cache", enabled=True)
    key = make_key(backend="opencl", compiler="cc 1", device="d", source="__kernel void k() {}")
    store.store(key, b"payload", source_suffix=".cl")
    meta = store.entry_dir(key) / "meta.json"
    good = json.loads(meta.read_text())
    meta.write_text(json.dumps(good)[:-1] + ', "extra_field": ' + nest(50_000) + "}")
    with pytest.warns(CacheWarning, match="nested too deep"):
        assert store.load(key) is None
    api = CacheAPI(store)
    assert api.entries() == [] and api.stats().incomplete == 1
    store.store(key, b"payload", source_suffix=".cl")          # the compile that repairs it
    assert store.load(key) == b"payload" and len(api.entries()) == 1


def test_fifo_as_metadata_never_blocks_and_is_replaced(script, cache):
    meta = only_entry(cache) / "meta.json"
    meta.unlink()
    os.mkfifo(meta)
    assert run_cli(cache, "list")["entries"] == []

    recompiled_once_then_hit(script, cache, "not a regular file")
    assert meta.is_file()


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_directory_in_place_of_a_numba_cache_file_heals(script, cache, suffix):
    numba_file = sorted((only_entry(cache) / "__pycache__").glob(f"*{suffix}"))[0]
    numba_file.unlink()
    (numba_file / "inside").mkdir(parents=True)      # not empty: rmdir would not do

    recompiled_once_then_hit(script, cache, "not a regular file")
    assert numba_file.is_file()


def test_entry_removed_between_lookup_and_load_is_a_plain_miss(script, cache):
    gone = run_query(script, cache, "vanish")
    assert gone["right"] and gone["kernels"][0]["cache"] == "compiled"
    assert gone["cache_warnings"] == [] and gone["stats"]["damaged"] == 0
    # the compile that followed stored the entry afresh
    again = run_query(script, cache)
    assert again["right"] and again["kernels"][0]["cache"] == "disk"


@pytest.fixture
def nearly_full_disk(tmp_path):
    """A 2 MiB tmpfs with 48 KiB left: room for an entry's source and metadata, not for the
    numba cache files of one query (about 150 KB)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root on Linux")
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs",
                           str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        st = os.statvfs(mount)
        (mount / "filler").write_bytes(bytes(st.f_bavail * st.f_frsize - 48 * 1024))
        yield mount / "cache"
    finally:
        if subprocess.run(["umount", str(mount)]).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)])


def test_nearly_full_disk_warns_and_runs_from_memory(script, nearly_full_disk):
    full = run_query(script, nearly_full_disk)
    assert full["right"] and full["kernels"][0]["cache"] == "compiled"
    (warning,) = full["cache_warnings"]
    assert "No space left on device" in warning and "memory" in warning
    assert full["stats"]["disk_writable"] is False
    # nothing half-saved is taken for an entry: the next process compiles again, still right
    again = run_query(script, nearly_full_disk)
    assert again["right"] and again["kernels"][0]["cache"] == "compiled"


def test_nearly_full_disk_with_tiering_the_kernel_tier_still_takes_over(script, nearly_full_disk):
    tiered = run_query(script, nearly_full_disk, "tiered", QUERYCOMPUTE_TIERED="1")
    assert tiered["right"]
    assert not any("background compile" in w for w in tiered["other_warnings"])
    assert tiered["tier"] == "kernel"
    assert [k["dialect"] for k in tiered["kernels"]] == ["numba"]
    assert any("No space left on device" in w for w in tiered["cache_warnings"])
