"""Issue 6 points 1, 4 and 6 in fresh processes: QUERYCOMPUTE_CACHE=0, an unwritable cache
directory, QUERYCOMPUTE_DUMP_SOURCE=1, and the default location."""
import json
import subprocess
import sys

from cache_worker import child_env, run_worker

JOB = {"action": "binary", "compiler": "fakecc 1.0", "source": "__kernel void s() {}\n",
       "touch_again": True}


def test_cache_switched_off_keeps_everything_in_memory(tmp_path):
    cache = tmp_path / "cache"
    result = run_worker(cache, JOB, QUERYCOMPUTE_CACHE="0")
    assert result["right"] and result["second"]["origin"] == "compiled"
    assert result["warnings"] == [] and not result["stats"]["disk_enabled"]
    assert not cache.exists()


def test_unwritable_cache_directory_degrades_to_memory_only_with_one_warning(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    result = run_worker(blocker / "cache", JOB)
    assert result["right"] and result["second"]["right"]
    assert len(result["warnings"]) == 1 and "memory only" in result["warnings"][0]
    assert result["stats"]["disk_writable"] is False


def test_dump_source_prints_the_kernel_when_compiled(tmp_path):
    code = ("from querycompute.cache import dump_source\n"
            "dump_source('qc_sum', 'cuda', 'extern \"C\" __global__ void qc_sum() {}')\n")
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=child_env(tmp_path))
    loud = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(tmp_path, QUERYCOMPUTE_DUMP_SOURCE="1"))
    assert quiet.stderr == "" and quiet.stdout == ""
    assert "cuda kernel qc_sum" in loud.stderr and "__global__ void qc_sum()" in loud.stderr


def test_default_location_is_the_user_cache_directory(tmp_path):
    env = child_env(tmp_path, XDG_CACHE_HOME=tmp_path / "xdg")
    del env["QUERYCOMPUTE_CACHE_DIR"]
    code = "import querycompute.cache as c, json; print(json.dumps(str(c.path)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout
    if sys.platform.startswith("linux"):
        assert json.loads(out) == str(tmp_path / "xdg" / "querycompute")
    else:
        assert json.loads(out).endswith("querycompute")
