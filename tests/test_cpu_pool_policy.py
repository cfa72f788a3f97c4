"""The cpu backend starts numba's thread pool with OpenMP's passive wait policy unless the
user chose one (backends/cpu.py start_pool; docs/configuration.md; the long-row kernels'
prange loops use it; fused passes and column operations run on the morsel pool):
GNU OpenMP reports the policy it read when it loaded (OMP_DISPLAY_ENV=true), and the
variable never stays in the process's environment. Each case is a fresh interpreter (OpenMP reads it once per process)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os, numpy as np, querycompute as qc
    X = np.linspace(-1, 1, 4 * 300_000, dtype=np.float32).reshape(4, -1)   # long rows, 1.2M
    got = qc.query(X).on("cpu").select(lambda r: np.exp(r).sum()).to_array()  # values: prange
    ok = bool(np.allclose(got, np.exp(X.astype(np.float64)).sum(axis=1), rtol=1e-5))
    print("RESULT", ok, os.environ.get("OMP_WAIT_POLICY"))
""")


def _run(tmp_path, **env_changes) -> tuple[str, str]:
    script = tmp_path / "pool_policy.py"        # lambdas are read from a real file
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(QUERYCOMPUTE_TIERED="0", OMP_DISPLAY_ENV="true", **env_changes)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    policy = [line.split("=")[1].strip() for line in (done.stdout + done.stderr).splitlines()
              if line.strip().startswith("OMP_WAIT_POLICY =")]
    if not policy:
        pytest.skip("numba's threading layer here is not GNU OpenMP (nothing to set)")
    return result[0], policy[0]


def test_pool_starts_passive_and_leaves_the_environment_alone(tmp_path):
    result, policy = _run(tmp_path)
    assert result == "RESULT True None"                # right answer; variable removed again
    assert policy == "'PASSIVE'"


def test_a_policy_the_user_set_is_kept(tmp_path):
    result, policy = _run(tmp_path, OMP_WAIT_POLICY="active")
    assert result == "RESULT True active"
    assert policy == "'ACTIVE'"
