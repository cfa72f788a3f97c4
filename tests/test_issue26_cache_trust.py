"""Issue 26 item 1 (DESIGN.md section 6, "Trust"): kernels are loaded from the disk cache only
where nobody else can write. A group- or world-writable cache directory turns the disk cache
off for the process with one warning naming the path and the fix; an entry owned by another
(real) user is not loaded. Issue 26 item 9: QUERYCOMPUTE_CACHE_MAX_SIZE."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from cache_worker import child_env
from querycompute.cache import CacheAPI, CacheWarning, DiskCache, make_key

HERE = Path(__file__).parent
MODULE = "import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n"


def binary_key():
    return make_key(backend="opencl", compiler="fakecc", device="dev", options=(),
                    source="__kernel void trust() {}\n")


def module_key():
    return make_key(backend="cpu", compiler="numba test", device="host", source=MODULE)


def populate(root: Path):
    """One binary entry and one sealed numba module entry at `root`, made by this user."""
    store = DiskCache(root, enabled=True)
    store.store(binary_key(), b"payload", source_suffix=".cl", kernel_names=["trust"])
    path = store.store_module(module_key(), kernel_names=["twice"])
    assert store.import_module(path, module_key()).twice(3) == 6
    store.seal_module(module_key())
    return store


def loads(root: Path):
    """A fresh store's view of `root`: (binary payload, module path, CacheWarnings)."""
    store = DiskCache(root)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = store.load(binary_key()), store.load_module(module_key())
    return store, found, [str(w.message) for w in caught if w.category is CacheWarning]


def test_own_entries_in_own_directory_are_trusted(tmp_path):
    # as root (this machine): a root-owned entry in a root-owned directory is loaded
    populate(tmp_path / "cache")
    store, (payload, path), caught = loads(tmp_path / "cache")
    assert payload == b"payload" and path is not None and caught == []
    assert store.enabled and store.untrusted_reason is None


def test_world_writable_directory_turns_the_disk_cache_off_with_one_warning(tmp_path):
    root = tmp_path / "cache"
    populate(root)
    os.chmod(root, 0o777)
    store, (payload, path), caught = loads(root)
    assert payload is None and path is None            # nothing loaded from it
    assert len(caught) == 1
    assert str(root) in caught[0] and "writable by its group and others" in caught[0]
    assert f"chmod 700 {root}" in caught[0] and "QUERYCOMPUTE_CACHE_DIR" in caught[0]
    assert not store.enabled and "0777" in store.untrusted_reason
    # nothing written either: the store is off for the process, compiles stay in memory
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        store.store(make_key(backend="opencl", compiler="c", device="d", source="new"), b"x",
                    source_suffix=".cl")
    assert not [w for w in again if w.category is CacheWarning]
    assert len(list((root / "v1").iterdir())) == 2


def test_group_writable_ancestor_without_sticky_bit_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    populate(shared / "cache")
    os.chmod(shared, 0o775)
    store, (payload, path), caught = loads(shared / "cache")
    assert payload is None and path is None and len(caught) == 1
    assert f"{shared} is writable by its group" in caught[0]


def test_query_on_a_world_writable_cache_is_right_and_compiled(tmp_path):
    """End to end, in fresh processes: the cpu kernel numba cached there is not loaded."""
    root = tmp_path / "cache"
    env = child_env(root)

    def query():
        done = subprocess.run([sys.executable, str(HERE / "cache_query_script.py"), "cpu", "100"],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = query()
    assert [k["cache"] for k in first["kernels"]] == ["compiled"] and first["warnings"] == []
    meta = [p.read_bytes() for p in root.glob("v1/*/meta.json")]
    os.chmod(root, 0o777)
    second = query()
    assert [k["cache"] for k in second["kernels"]] == ["compiled"]
    assert second["result"] == first["result"]
    assert len(second["warnings"]) == 1 and str(root) in second["warnings"][0]
    assert not second["stats"]["disk_enabled"] and second["stats"]["disk_hits"] == 0
    assert [p.read_bytes() for p in root.glob("v1/*/meta.json")] == meta   # not even a hit


@pytest.fixture
def other_user():
    """A real second user (useradd), removed afterwards; only root can make one."""
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make a second user")
    name = f"qc26p{os.getpid() % 100000}"
    subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def test_entry_planted_by_another_user_is_not_loaded(tmp_path, other_user):
    """The other user copies a valid entry (matching hashes and all) and it ends up in our
    private cache: its files are theirs, so it is a miss with a warning, then rewritten."""
    made = tmp_path / "made"
    populate(made)
    drop = Path(tempfile.mkdtemp(prefix="qc26-drop-"))
    try:
        os.chmod(drop, 0o711)
        shutil.copytree(made, drop / "src")
        subprocess.run(["chmod", "-R", "a+rX", str(drop / "src")], check=True)
        (drop / "theirs").mkdir()
        shutil.chown(drop / "theirs", other_user)
        subprocess.run(["cp", "-r", str(drop / "src" / "v1"), str(drop / "theirs" / "v1")],
                       user=other_user, check=True, timeout=60)
        root = tmp_path / "cache"
        (root / "v1").mkdir(mode=0o700, parents=True)
        for entry in (drop / "theirs" / "v1").iterdir():
            shutil.move(str(entry), str(root / "v1" / entry.name))
    finally:
        shutil.rmtree(drop, ignore_errors=True)
    owner = (root / "v1" / binary_key().digest / "kernel.bin").stat().st_uid
    assert owner != os.geteuid()
    store, (payload, path), caught = loads(root)
    assert payload is None and path is None
    assert len(caught) == 2 and all("owned by another user" in m for m in caught)
    # compiling again rewrites the entry as ours, and then it is trusted
    populate(root)
    _store, (payload, path), caught = loads(root)
    assert payload == b"payload" and path is not None and caught == []


def test_max_size_prunes_least_recently_used_after_a_save(tmp_path, monkeypatch):
    monkeypatch.setenv("QUERYCOMPUTE_CACHE_MAX_SIZE", "9KB")
    store = DiskCache(tmp_path / "cache")
    keys = [make_key(backend="opencl", compiler="c", device="d", source=f"k{i}") for i in range(4)]
    for i, key in enumerate(keys):
        store.store(key, bytes(2000), source_suffix=".cl")
        if i == 1:
            assert store.load(keys[0]) is not None          # keys[0] is now used after keys[1]
    entries = CacheAPI(store).entries()
    assert sum(e.size_bytes for e in entries) <= 9000
    assert {e.key for e in entries} == {keys[0].digest, keys[2].digest, keys[3].digest}


def test_max_size_accepts_units_and_refuses_nonsense(monkeypatch):
    from querycompute import config
    from querycompute.log import ConfigWarning
    monkeypatch.setenv("QUERYCOMPUTE_CACHE_MAX_SIZE", "2GiB")
    assert config.get("QUERYCOMPUTE_CACHE_MAX_SIZE") == 2 << 30
    monkeypatch.setenv("QUERYCOMPUTE_CACHE_MAX_SIZE", "lots")
    with pytest.warns(ConfigWarning, match="QUERYCOMPUTE_CACHE_MAX_SIZE"):
        assert config.get("QUERYCOMPUTE_CACHE_MAX_SIZE") is None
