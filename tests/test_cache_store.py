"""The disk store in one process: entry layout, header, metadata, modes, counters, the
memory-only switch, and the module path the cpu backend uses."""
import json
import os
import stat
import struct
import warnings

import pytest

from querycompute.cache import CacheAPI, CacheWarning, DiskCache, make_key
from querycompute.cache.entry_format import HEADER_SIZE, MAGIC

SOURCE = "__kernel void qc_kernel(__global float *x) { x[0] = 1.0f; }\n"


def key_for(source=SOURCE, compiler="pocl 6.0", options=("-cl-std=CL1.2",)):
    return make_key(backend="opencl", compiler=compiler, device="cpu", options=options,
                    source=source)


@pytest.fixture
def store(tmp_path):
    return DiskCache(tmp_path / "cache", enabled=True)


def test_store_then_load_round_trips_and_lays_out_the_entry(store):
    key = key_for()
    assert store.load(key) is None
    store.store(key, b"\x00binary\xff", source_suffix=".cl", kernel_names=["qc_kernel"],
                query="select(lambda v: v * 2).sum()", dtypes=["float32"], compile_ms=12.5,
                extra={"arch": "znver3"})
    assert store.load(key) == b"\x00binary\xff"
    entry = store.entry_dir(key)
    assert entry == store.path / "v1" / key.digest
    assert sorted(p.name for p in entry.iterdir()) == sorted(
        ["kernel.bin", "meta.json", f"qc_{key.digest[:16]}.cl"])
    assert (entry / f"qc_{key.digest[:16]}.cl").read_text() == SOURCE


def test_directories_are_private(store):
    key = key_for()
    store.store(key, b"x", source_suffix=".cl")
    for directory in (store.path, store.entries_root, store.entry_dir(key)):
        assert stat.S_IMODE(directory.stat().st_mode) & 0o077 == 0, directory


def test_binary_header_carries_magic_version_length_and_hashes(store):
    import hashlib
    key = key_for()
    store.store(key, b"payload", source_suffix=".cl")
    data = (store.entry_dir(key) / "kernel.bin").read_bytes()
    magic, version, length, payload_sha, key_sha = struct.unpack_from("<8sIQ32s32s", data)
    assert (magic, version, length) == (MAGIC, 1, 7)
    assert payload_sha == hashlib.sha256(b"payload").digest()
    assert key_sha.hex() == key.digest
    assert data[HEADER_SIZE:] == b"payload"


def test_metadata_records_what_the_issue_lists(store):
    key = key_for()
    store.store(key, b"abc", source_suffix=".cl", kernel_names=["k1", "k2"], query="q",
                dtypes=["float32", "int32"], compile_ms=3.25)
    meta = json.loads((store.entry_dir(key) / "meta.json").read_text())
    assert meta["key"] == key.digest and meta["backend"] == "opencl"
    assert meta["kernel_names"] == ["k1", "k2"] and meta["query"] == "q"
    assert meta["dtypes"] == ["float32", "int32"]
    assert meta["compiler"] == "pocl 6.0" and meta["device"] == "cpu"
    assert meta["options"] == ["-cl-std=CL1.2"]
    assert meta["compile_ms"] == 3.25 and meta["hit_count"] == 0
    assert meta["sizes"] == {"binary": 3, "source": len(SOURCE)}
    assert meta["created"] == meta["last_used"] and meta["created"].endswith("Z")


def test_each_disk_hit_updates_last_used_and_hit_count(store):
    key = key_for()
    store.store(key, b"abc", source_suffix=".cl")
    first = json.loads((store.entry_dir(key) / "meta.json").read_text())
    store.load(key)
    store.load(key)
    meta = json.loads((store.entry_dir(key) / "meta.json").read_text())
    assert meta["hit_count"] == 2 and meta["last_used"] > first["last_used"]
    assert meta["created"] == first["created"]


def test_counters_and_stats(store):
    api = CacheAPI(store)
    key = key_for()
    store.load(key)                                   # miss
    store.store(key, b"abc", source_suffix=".cl", compile_ms=2.0)
    store.load(key)                                   # disk hit
    api.note_memory_hit()
    api.note_memory_hit()
    s = api.stats()
    assert (s.memory_hits, s.disk_hits, s.misses, s.compiles, s.compile_ms) == (2, 1, 1, 1, 2.0)
    assert (s.entries, s.entries_by_backend, s.incomplete) == (1, {"opencl": 1}, 0)
    assert s.bytes == sum(p.stat().st_size for p in store.entry_dir(key).iterdir())
    assert s.disk_hits_all_time == 1 and s.disk_enabled and s.disk_writable
    assert json.loads(json.dumps(s.as_dict()))["entries"] == 1


def test_switched_off_cache_reads_and_writes_nothing_but_counts(tmp_path):
    store = DiskCache(tmp_path / "cache", enabled=False)
    key = key_for()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.store(key, b"abc", source_suffix=".cl")
        assert store.load(key) is None
    assert not (tmp_path / "cache").exists()
    assert (store.counters.compiles, store.counters.misses) == (1, 1)


def test_environment_switch_is_read_on_first_use(monkeypatch, tmp_path):
    store = DiskCache()
    monkeypatch.setenv("QUERYCOMPUTE_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("QUERYCOMPUTE_CACHE", "0")
    assert store.path == tmp_path / "env" and not store.enabled
    monkeypatch.setenv("QUERYCOMPUTE_CACHE", "1")
    store.reset()
    assert store.enabled


def test_store_refuses_a_payload_that_is_not_bytes(store):
    with pytest.raises(TypeError, match="payload must be bytes"):
        store.store(key_for(), "text", source_suffix=".cl")


def test_store_refuses_a_source_suffix_that_is_not_an_extension(store):
    with pytest.raises(ValueError, match="source_suffix"):
        store.store(key_for(), b"x", source_suffix="cl/../x")


MODULE = "import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n"


def module_key(source=MODULE):
    return make_key(backend="cpu", compiler="numba test", device="host", source=source)


def test_module_entry_is_written_imported_sealed_and_found_again(store):
    key = module_key()
    assert store.load_module(key) is None
    path = store.store_module(key, kernel_names=["twice"])
    assert path == store.entry_dir(key) / f"qc_{key.digest[:16]}.py"
    assert path.stem.isidentifier()                  # importable, and names the entry
    module = store.import_module(path, key)
    assert module.twice(21) == 42
    assert store.load_module(key) is None            # not sealed yet: numba files unverified
    store.seal_module(key, compile_ms=5.0)
    meta = json.loads((store.entry_dir(key) / "meta.json").read_text())
    assert meta["sealed_files"] and all(n.endswith((".nbi", ".nbc")) for n in meta["sealed_files"])
    assert meta["compile_ms"] == 5.0
    assert store.load_module(key) == path


def test_import_refuses_a_module_whose_bytes_do_not_match_the_key(store, tmp_path):
    key = module_key()
    path = tmp_path / "qc_other.py"
    path.write_text(MODULE.replace("2 * x", "3 * x"))
    with pytest.raises(RuntimeError, match="refusing to import"):
        store.import_module(path, key)


def test_module_with_the_cache_switched_off_lives_in_a_private_temporary_directory(tmp_path):
    store = DiskCache(tmp_path / "cache", enabled=False)
    key = module_key(MODULE.replace("cache=True", "cache=False"))
    path = store.store_module(key)
    assert not (tmp_path / "cache").exists() and path.exists()
    assert store.import_module(path, key).twice(4) == 8


def test_unwritable_directory_degrades_to_memory_only_with_one_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    store = DiskCache(blocker / "cache", enabled=True)
    with pytest.warns(CacheWarning, match="memory") as caught:
        store.store(key_for(), b"x", source_suffix=".cl")
        store.store(key_for(source="other"), b"y", source_suffix=".cl")
        path = store.store_module(module_key())
    assert len(caught) == 1
    assert not store.writable and "a-file" in store.unwritable_reason
    assert path.exists() and store.import_module(path, module_key()).twice(1) == 2


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="needs POSIX permissions that apply (root ignores them)")
def test_read_only_directory_serves_hits_but_writes_nothing(tmp_path):
    store = DiskCache(tmp_path / "cache", enabled=True)
    key = key_for()
    store.store(key, b"abc", source_suffix=".cl")
    os.chmod(store.entries_root, 0o500)
    try:
        reader = DiskCache(tmp_path / "cache", enabled=True)
        assert reader.load(key) == b"abc"
        with pytest.warns(CacheWarning, match="memory"):
            reader.store(key_for(source="new"), b"x", source_suffix=".cl")
        assert not reader.writable
    finally:
        os.chmod(store.entries_root, 0o700)


def test_full_disk_degrades_to_memory_only(store, monkeypatch):
    # Fault injection at the OS boundary: a full disk can't be made portably in a test.
    import errno
    key = key_for()

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.warns(CacheWarning, match="No space left"):
        store.store(key, b"abc", source_suffix=".cl")
    monkeypatch.undo()
    assert not store.writable
    assert list(store.entry_dir(key).iterdir()) == []       # no temp files left behind
    assert store.load(key) is None



def test_clear_and_prune_sweep_what_killed_processes_left_behind(store):
    key = key_for()
    store.store(key, b"abc", source_suffix=".cl")
    stale = store.entry_dir(key) / ".kernel.bin.abc.tmp"
    fresh = store.entry_dir(key) / ".kernel.bin.def.tmp"
    stale.write_bytes(b"half a write")
    fresh.write_bytes(b"a write in progress")
    os.utime(stale, (0, 0))
    trash = store.entries_root / ".trash-0123"
    (trash / "sub").mkdir(parents=True)
    removal = CacheAPI(store).prune(max_bytes=10**9)
    assert removal.entries == 0
    assert not stale.exists() and fresh.exists() and not trash.exists()
    assert store.load(key) == b"abc"


def test_a_module_numba_did_not_cache_stays_a_miss(store):
    key = module_key(MODULE.replace("cache=True", "cache=False"))
    path = store.store_module(key)
    assert store.import_module(path, key).twice(3) == 6
    store.seal_module(key)
    assert store.load_module(key) is None
