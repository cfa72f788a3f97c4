"""Issue 6 point 5: `querycompute cache list|show|stats|clear|prune`, readable by default
and stable JSON with --json; and prune keeps the most recently used entries."""
import json

import pytest

from cache_worker import run_cache_cli, run_worker


def binary_job(name: str, backend: str = "opencl") -> dict:
    return {"action": "binary", "backend": backend, "compiler": "fakecc 1.0",
            "source": f"__kernel void {name}() {{}}\n", "query": f"query {name}"}


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """Three opencl entries and one cuda entry, made by separate processes."""
    cache = tmp_path_factory.mktemp("cli") / "cache"
    keys = {}
    for name, backend in (("a", "opencl"), ("b", "opencl"), ("c", "opencl"), ("d", "cuda")):
        keys[name] = run_worker(cache, binary_job(name, backend))["key"]
    return cache, keys


def listing(cache, *args) -> list[dict]:
    done = run_cache_cli(cache, "list", "--json", *args)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["path"] == str(cache)
    return document["entries"]


def test_list_text_names_every_entry(populated):
    cache, keys = populated
    done = run_cache_cli(cache, "list")
    assert done.returncode == 0
    for key in keys.values():
        assert key[:16] in done.stdout
    assert "4 entries" in done.stdout and "query a" in done.stdout


def test_list_json_is_stable_and_complete(populated):
    cache, keys = populated
    entries = listing(cache)
    assert sorted(e["key"] for e in entries) == sorted(keys.values())
    expected = {"key", "backend", "kind", "kernel_names", "query", "dtypes", "compiler",
                "device", "options", "created", "last_used", "compile_ms", "hit_count",
                "size_bytes", "sizes", "extra", "path", "source_path"}
    assert all(set(e) == expected for e in entries)
    assert run_cache_cli(cache, "list", "--json").stdout == run_cache_cli(
        cache, "list", "--json").stdout                  # listing does not touch entries


def test_list_filters_by_backend(populated):
    cache, keys = populated
    assert [e["key"] for e in listing(cache, "--backend", "cuda")] == [keys["d"]]
    assert run_cache_cli(cache, "list", "--backend", "metal").stdout.startswith(
        "no cache entries for backend metal")


def test_show_prints_metadata_and_source(populated):
    cache, keys = populated
    done = run_cache_cli(cache, "show", keys["b"][:10])
    assert done.returncode == 0
    assert keys["b"] in done.stdout and "query b" in done.stdout
    assert "__kernel void b() {}" in done.stdout
    document = json.loads(run_cache_cli(cache, "show", keys["b"][:10], "--json").stdout)
    assert document["key"] == keys["b"] and document["source"] == "__kernel void b() {}\n"


def test_show_explains_a_prefix_that_matches_nothing(populated):
    cache, _keys = populated
    done = run_cache_cli(cache, "show", "zz")
    assert done.returncode == 1 and "no cache entry" in done.stderr


def test_find_explains_an_empty_or_ambiguous_prefix(tmp_path):
    from querycompute.cache import CacheAPI, DiskCache, make_key
    store = DiskCache(tmp_path, enabled=True)
    keys = [make_key(backend="cpu", compiler="c", device="d", source=str(i)) for i in range(17)]
    for key in keys:
        store.store(key, b"x", source_suffix=".py")
    api = CacheAPI(store)
    # 17 keys, 16 hex digits: at least two share their first digit.
    firsts = [k.digest[0] for k in keys]
    shared = next(d for d in firsts if firsts.count(d) > 1)
    with pytest.raises(KeyError, match="give more digits"):
        api.find(shared)
    with pytest.raises(KeyError, match="at least one hex digit"):
        api.find("  ")
    assert api.find(keys[5].digest[:20].upper()).key == keys[5].digest


def test_stats_text_and_json(populated):
    cache, _keys = populated
    text = run_cache_cli(cache, "stats").stdout
    assert f"path:      {cache}" in text and "entries:   4" in text and "opencl: 3" in text
    stats = json.loads(run_cache_cli(cache, "stats", "--json").stdout)
    assert stats["entries"] == 4 and stats["entries_by_backend"] == {"cuda": 1, "opencl": 3}
    assert stats["bytes"] == sum(e["size_bytes"] for e in listing(cache))


def test_clear_by_backend_then_everything(tmp_path):
    cache = tmp_path / "cache"
    for name, backend in (("a", "opencl"), ("b", "cuda")):
        run_worker(cache, binary_job(name, backend))
    done = run_cache_cli(cache, "clear", "--backend", "cuda", "--json")
    assert json.loads(done.stdout)["removed_entries"] == 1
    assert [e["backend"] for e in listing(cache)] == ["opencl"]
    done = run_cache_cli(cache, "clear")
    assert done.stdout.startswith("removed 1 entry (")
    assert listing(cache) == [] and list((cache / "v1").iterdir()) == []


def test_prune_keeps_the_most_recently_used_entries_under_the_limit(tmp_path):
    cache = tmp_path / "cache"
    keys = [run_worker(cache, binary_job(f"k{i}"))["key"] for i in range(5)]
    # Use k1 and k3 again in later processes: they become the most recently used.
    for i in (1, 3):
        assert run_worker(cache, binary_job(f"k{i}"))["origin"] == "disk"
    sizes = {e["key"]: e["size_bytes"] for e in listing(cache)}
    limit = sizes[keys[1]] + sizes[keys[3]] + 10
    done = run_cache_cli(cache, "prune", "--max-size", str(limit), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed_entries"] == 3
    kept = listing(cache)
    assert sorted(e["key"] for e in kept) == sorted([keys[1], keys[3]])
    assert sum(e["size_bytes"] for e in kept) <= limit


def test_prune_to_zero_removes_everything_and_accepts_units(tmp_path):
    cache = tmp_path / "cache"
    run_worker(cache, binary_job("x"))
    assert run_cache_cli(cache, "prune", "--max-size", "1MB").stdout.startswith("pruned 0")
    assert run_cache_cli(cache, "prune", "--max-size", "0").stdout.startswith("pruned 1")


def test_prune_refuses_an_unreadable_size(tmp_path):
    done = run_cache_cli(tmp_path, "prune", "--max-size", "lots")
    assert done.returncode == 2 and "e.g. 500MB" in done.stderr


def test_damaged_entries_are_counted_and_cleared(tmp_path):
    cache = tmp_path / "cache"
    key = run_worker(cache, binary_job("x"))["key"]
    (cache / "v1" / key / "meta.json").write_text("{broken")
    stats = json.loads(run_cache_cli(cache, "stats", "--json").stdout)
    assert (stats["entries"], stats["incomplete"]) == (0, 1) and stats["bytes"] > 0
    assert "removed 1 entry (" in run_cache_cli(cache, "clear").stdout
    assert not (cache / "v1" / key).exists()
