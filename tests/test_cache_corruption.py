"""Issue 6 point 4, proved with real processes: a damaged entry is one warning, a recompile
and a rewrite, never a crash and never a wrong kernel; the next process hits again."""
import json
import shutil
from pathlib import Path

import pytest

from cache_worker import run_worker

BINARY_JOB = {"action": "binary", "compiler": "fakecc 1.0", "options": ["-O2"],
              "source": "__kernel void k(__global float *x) { x[0] = 42.0f; }\n"}


def entry_of(cache_dir: Path) -> Path:
    (entry,) = [p for p in (cache_dir / "v1").iterdir() if not p.name.startswith(".")]
    return entry


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def truncate(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def become_directory(path: Path) -> None:          # unreadable as a file, even for root
    path.unlink()
    path.mkdir()


def rewrite_meta(entry: Path, **changes) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    meta.update(changes)
    (entry / "meta.json").write_text(json.dumps(meta))


def source_file(entry: Path) -> Path:
    return next(entry.glob("qc_*"))


def graft_foreign_binary(entry: Path, tmp: Path) -> None:
    """A valid binary of another key, copied over this entry's: header says another key."""
    other = tmp / "other-cache"
    run_worker(other, {**BINARY_JOB, "source": "__kernel void other() {}\n"})
    shutil.copy(entry_of(other) / "kernel.bin", entry / "kernel.bin")


DAMAGE = {
    "binary truncated to half": lambda e, t: truncate(e / "kernel.bin", 1000),
    "binary shorter than its header": lambda e, t: truncate(e / "kernel.bin", 10),
    "binary emptied": lambda e, t: truncate(e / "kernel.bin", 0),
    "binary payload bit flipped": lambda e, t: flip_byte(e / "kernel.bin", -1),
    "binary magic altered": lambda e, t: flip_byte(e / "kernel.bin", 0),
    "binary length field altered": lambda e, t: flip_byte(e / "kernel.bin", 12),
    "binary with trailing garbage": lambda e, t: (e / "kernel.bin").write_bytes(
        (e / "kernel.bin").read_bytes() + b"junk"),
    "binary of another key": graft_foreign_binary,
    "binary deleted": lambda e, t: (e / "kernel.bin").unlink(),
    "binary unreadable": lambda e, t: become_directory(e / "kernel.bin"),
    "metadata not JSON": lambda e, t: (e / "meta.json").write_text("{not json"),
    "metadata emptied": lambda e, t: truncate(e / "meta.json", 0),
    "metadata truncated": lambda e, t: truncate(e / "meta.json", 40),
    "metadata a JSON list": lambda e, t: (e / "meta.json").write_text("[1, 2]"),
    "metadata of another key": lambda e, t: rewrite_meta(e, key="0" * 64),
    "metadata hit count not a number": lambda e, t: rewrite_meta(e, hit_count="many"),
    "metadata names a foreign source file": lambda e, t: rewrite_meta(e, source_file="../x.cl"),
    "metadata unreadable": lambda e, t: become_directory(e / "meta.json"),
    "source altered": lambda e, t: source_file(e).write_text("__kernel void evil() {}\n"),
    "source deleted": lambda e, t: source_file(e).unlink(),
    "source not UTF-8": lambda e, t: source_file(e).write_bytes(b"\xff\xfe\x00"),
}


@pytest.fixture(scope="module")
def pristine_binary_cache(tmp_path_factory):
    """One binary entry stored by a worker; each test damages a copy of it."""
    cache = tmp_path_factory.mktemp("pristine") / "cache"
    first = run_worker(cache, BINARY_JOB)
    assert first["origin"] == "compiled" and first["right"]
    return cache


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_binary_entry_is_one_warning_a_recompile_and_a_rewrite(tmp_path, damage,
                                                                       pristine_binary_cache):
    cache = tmp_path / "cache"
    shutil.copytree(pristine_binary_cache, cache)
    DAMAGE[damage](entry_of(cache), tmp_path)

    second = run_worker(cache, {**BINARY_JOB, "touch_again": True})
    assert second["origin"] == "compiled" and second["right"]
    assert len(second["warnings"]) == 1 and "damaged" in second["warnings"][0]
    assert second["second"]["origin"] == "disk" and second["second"]["right"]   # rewritten

    third = run_worker(cache, BINARY_JOB)
    assert third["origin"] == "disk" and third["right"] and third["warnings"] == []


def test_missing_metadata_is_a_quiet_miss_like_an_entry_still_being_written(tmp_path):
    cache = tmp_path / "cache"
    run_worker(cache, BINARY_JOB)
    (entry_of(cache) / "meta.json").unlink()
    second = run_worker(cache, BINARY_JOB)
    assert second["origin"] == "compiled" and second["right"] and second["warnings"] == []
    assert run_worker(cache, BINARY_JOB)["origin"] == "disk"


def test_only_one_warning_per_damaged_entry_per_process(tmp_path):
    import warnings
    from querycompute.cache import DiskCache, make_key
    cache = tmp_path / "cache"
    run_worker(cache, BINARY_JOB)
    flip_byte(entry_of(cache) / "kernel.bin", -1)
    store = DiskCache(cache, enabled=True)
    key = make_key(backend="opencl", compiler=BINARY_JOB["compiler"], device="test-device",
                   options=BINARY_JOB["options"], source=BINARY_JOB["source"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.load(key) is None and store.load(key) is None   # not repaired between
    assert len(caught) == 1 and store.counters.damaged == 2


MODULE_JOB = {"action": "module", "scale": 3}


def pycache_file(entry: Path, suffix: str) -> Path:
    return next((entry / "__pycache__").glob(f"*{suffix}"))


MODULE_DAMAGE = {
    # The altered module computes x * 4 + 1: importing it would give a wrong result.
    "module source altered": lambda e: source_file(e).write_text(
        source_file(e).read_text().replace("x * 3", "x * 4")),
    "module source deleted": lambda e: source_file(e).unlink(),
    "numba index garbage": lambda e: pycache_file(e, ".nbi").write_bytes(b"garbage"),
    "numba index truncated": lambda e: truncate(pycache_file(e, ".nbi"), 20),
    "numba data bit flipped": lambda e: flip_byte(pycache_file(e, ".nbc"), -5),
    "numba data deleted": lambda e: pycache_file(e, ".nbc").unlink(),
    "metadata seal altered": lambda e: rewrite_meta(e, sealed_files={"x.nbi": "0" * 64}),
}


@pytest.fixture(scope="module")
def pristine_module_cache(tmp_path_factory):
    """One numba module entry compiled and sealed by a worker; tests damage copies of it."""
    cache = tmp_path_factory.mktemp("pristine") / "cache"
    assert run_worker(cache, MODULE_JOB)["origin"] == "compiled"
    return cache


@pytest.mark.parametrize("damage", sorted(MODULE_DAMAGE))
def test_damaged_numba_module_entry_is_recompiled_never_run_as_is(tmp_path, damage,
                                                                  pristine_module_cache):
    cache = tmp_path / "cache"
    # copy2 keeps mtimes, which older numba versions key their own cache on.
    shutil.copytree(pristine_module_cache, cache, copy_function=shutil.copy2)
    MODULE_DAMAGE[damage](entry_of(cache))

    second = run_worker(cache, MODULE_JOB)
    assert second["origin"] == "compiled" and second["right"]
    assert second["numba_hits"] == 0 and len(second["warnings"]) == 1

    third = run_worker(cache, MODULE_JOB)
    assert third["origin"] == "disk" and third["right"] and third["warnings"] == []
    assert third["numba_hits"] == 1 and third["numba_misses"] == 0


def test_damaged_opencl_program_binary_is_rebuilt_by_the_real_compiler(tmp_path, ocl):
    cache = tmp_path / "cache"
    first = run_worker(cache, {"action": "opencl"})
    assert first["origin"] == "compiled" and first["right"]
    assert run_worker(cache, {"action": "opencl"})["origin"] == "disk"
    flip_byte(entry_of(cache) / "kernel.bin", -100)
    second = run_worker(cache, {"action": "opencl"})
    assert second["origin"] == "compiled" and second["right"] and len(second["warnings"]) == 1
    third = run_worker(cache, {"action": "opencl"})
    assert third["origin"] == "disk" and third["right"] and third["warnings"] == []


def test_a_numba_cache_miss_on_a_disk_hit_is_resealed_and_then_hit(tmp_path,
                                                                  pristine_module_cache):
    # NUMBA_CPU_NAME changes numba's target but not the module: numba misses its own cache,
    # compiles, adds to its files, and the worker re-seals them (the documented protocol).
    cache = tmp_path / "cache"
    shutil.copytree(pristine_module_cache, cache, copy_function=shutil.copy2)
    second = run_worker(cache, MODULE_JOB, NUMBA_CPU_NAME="generic")
    assert second["origin"] == "disk" and second["right"] and second["numba_misses"] == 1
    for env in ({"NUMBA_CPU_NAME": "generic"}, {}):
        again = run_worker(cache, MODULE_JOB, **env)
        assert again["origin"] == "disk" and again["right"] and again["warnings"] == []
        assert (again["numba_hits"], again["numba_misses"]) == (1, 0)
