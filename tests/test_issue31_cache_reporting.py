"""Issue 31 item 9: cache integrity and reporting.

- on a read-only cache directory numba's cache files are read from the verified entry only,
  never from (or into) numba's own ~/.cache/numba, and the trace says what happened;
- `cache clear` / `cache prune` on a read-only cache report what they could not remove;
- `cache list` / `cache show` never send escape sequences from meta.json to the terminal;
- a compile lock whose holder is stopped (SIGSTOP) is given up on after
  QUERYCOMPUTE_CACHE_LOCK_STALL seconds, with the holder's pid in the log.

Read-only is real: as root (who writes anywhere) the processes run without the capabilities
that bypass file modes (setpriv); as another user, plainly.
"""
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cache_worker import _CLI, child_env
from querycompute.cache import CacheAPI, DiskCache, make_key

HERE = Path(__file__).parent


def without_root_powers() -> list:
    """A command prefix under which file modes apply to this process too."""
    if os.name != "posix":
        pytest.skip("POSIX file modes")
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv cannot be made to respect file modes")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def make_read_only(root: Path, writable: bool = False) -> None:
    subprocess.run(["chmod", "-R", "u+w" if writable else "a-w", str(root)], check=True)


@pytest.fixture
def read_only_cleanup(tmp_path):
    yield
    make_read_only(tmp_path, writable=True)


def test_read_only_cache_serves_numba_hits_from_the_entry_only(tmp_path, read_only_cleanup):
    root, home = tmp_path / "cache", tmp_path / "home"
    home.mkdir()
    env = child_env(root, HOME=str(home))
    for name in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR"):
        env.pop(name, None)
    prefix = without_root_powers()

    def query():
        done = subprocess.run([*prefix, sys.executable, str(HERE / "cache_query_script.py"),
                               "cpu", "100"], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = query()
    assert [k["cache"] for k in first["kernels"]] == ["compiled"]
    make_read_only(root)
    for _ in range(2):                    # before the fix: "compiled" then a false "disk"
        again = query()
        assert [k["cache"] for k in again["kernels"]] == ["disk"]
        assert again["result"] == first["result"] and again["warnings"] == []
    assert [p for p in home.rglob("*") if p.is_file()] == []     # nothing of numba's own


def populate(root: Path, n: int) -> list:
    store = DiskCache(root, enabled=True)
    keys = [make_key(backend="opencl", compiler="c", device="d", source=f"k{i}") for i in range(n)]
    for key in keys:
        store.store(key, bytes(100), source_suffix=".cl", kernel_names=["k"],
                    query="select \x1b[31mred\x1b[0m\r\x1b]0;owned\x07 \u202eevil")
    return keys


def cli(root: Path, *argv: str, prefix=()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-c", _CLI, "cache", *argv], text=True,
                          capture_output=True, env=child_env(root), timeout=300)


@pytest.mark.parametrize("command", [("clear",), ("prune", "--max-size", "0")])
def test_clear_and_prune_on_a_read_only_cache_report_nothing_removed(tmp_path, command,
                                                                   read_only_cleanup):
    root = tmp_path / "cache"
    populate(root, 2)
    make_read_only(root)
    done = cli(root, *command, "--json", prefix=without_root_powers())
    report = json.loads(done.stdout)
    assert report["removed_entries"] == 0 and report["removed_bytes"] == 0
    assert report["failed_entries"] == 2 and "Permission denied" in report["error"]
    assert done.returncode == 1 and "could not remove 2 entries" in done.stderr
    assert len(list((root / "v1").iterdir())) == 2
    text = cli(root, *command, prefix=without_root_powers())
    assert text.stdout.startswith(("removed 0 entries", "pruned 0 entries"))


def test_list_and_show_escape_control_characters_from_metadata(tmp_path):
    root = tmp_path / "cache"
    key = populate(root, 1)[0]
    meta_path = root / "v1" / key.digest / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["kernel_names"] = ["k\x1b[2J"]
    meta["backend"] = "opencl\x1b[8m"
    meta_path.write_text(json.dumps(meta))
    for argv in (("list",), ("show", key.digest[:8]), ("clear", "--dry-run")):
        done = cli(root, *argv)
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout for c in "\x1b\x07\r\u202e"), argv
        assert "\\x1b" in done.stdout, argv
    assert "\\u202e" in cli(root, "show", key.digest[:8]).stdout
    # --json stays exact (JSON escapes it)
    listed = json.loads(cli(root, "list", "--json").stdout)["entries"][0]
    assert listed["kernel_names"] == ["k\x1b[2J"]


HOLDER = """
import sys, time
from querycompute.cache import DiskCache, make_key
store = DiskCache(sys.argv[1], enabled=True)
key = make_key(backend="opencl", compiler="c", device="d", source="locked")
with store.compile_lock(key):
    print("locked", flush=True)
    time.sleep(120)
"""


def _wait_until_stopped(pid: int, bound: float = 30.0) -> None:
    """Until /proc says `pid` is stopped (state T): on a loaded machine a SIGSTOP can take a
    while to be delivered, and the waiter names the holder "(stopped)" only once it is."""
    end = time.monotonic() + bound
    while time.monotonic() < end:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop within {bound} s")


def test_a_stopped_lock_holder_is_named_and_given_up_on(tmp_path, monkeypatch, caplog):
    if not hasattr(signal, "SIGSTOP") or not os.path.exists("/proc/self/stat"):
        pytest.skip("needs SIGSTOP and /proc")
    root = tmp_path / "cache"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], env=child_env(root),
                              stdout=subprocess.PIPE, text=True)
    outcome = {}
    try:
        assert holder.stdout.readline().strip() == "locked"
        os.kill(holder.pid, signal.SIGSTOP)
        _wait_until_stopped(holder.pid)   # the stop is delivered when the holder next runs
        monkeypatch.setenv("QUERYCOMPUTE_CACHE_LOCK_STALL", "1")
        store = DiskCache(root, enabled=True)
        key = make_key(backend="opencl", compiler="c", device="d", source="locked")

        def compile_it():
            with pytest.warns(Warning, match="could not take the compile lock"):
                outcome["result"] = store.obtain(key, lambda: (b"bin", "kernel"),
                                                 lambda payload: payload,
                                                 source_suffix=".cl")

        with caplog.at_level(logging.INFO, logger="querycompute"):
            waiter = threading.Thread(target=compile_it, daemon=True)
            waiter.start()
            waiter.join(timeout=90)       # a bound for a hang, not a timing: the old code waited 600 s
            assert not waiter.is_alive(), "still waiting for a stopped lock holder"
    finally:
        holder.kill()
        holder.wait(timeout=30)
    obj, origin, _ms = outcome["result"]
    assert (obj, origin) == ("kernel", "compiled")
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert any(level == logging.INFO and f"waiting for process {holder.pid}" in m
               for level, m in messages)
    assert any(level == logging.WARNING and f"process {holder.pid} (stopped)" in m
               and "without using any CPU" in m for level, m in messages)
    assert CacheAPI(store).entries()[0].key == key.digest       # the entry was published
