"""Issue 28: a warm disk-cache hit of the cpu backend's generic kernels (and a group_by's
modules) loads numba's machine code without importing numba (backends/cpu/native_loader.py).

Fresh processes over one cache: the first compiles (numba) and writes the numba-free payload
beside numba's files; the next calls the same code and never imports numba (G, K, J with the
numpy backend's bits: test_issue28_warm_columns.py); a kernel that raises raises the same
exception; a kernel whose code needs what the route
cannot provide, or arguments of a type it has no code for, fall back to numba's own load."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from querycompute.backends.cpu import native_loader, numba_loader

# a module text loaded like the generic kernels (numba_loader.load, native=True)
MODULE = textwrap.dedent('''
    import numpy as np
    from numba import njit

    LIMIT = 7
    SCALE = np.uint64(3)
    PAIR = (1, 2.5)


    @njit(cache=True, nogil=True)
    def checked(x, n):
        if n < 0:
            raise ValueError("n must not be negative")
        s = x[0] * 0
        for i in range(min(n, len(x))):
            s += x[i]
        return s, x[:n].copy()


    @njit(cache=True)
    def hashed(n):
        return hash("k" * n)
''')

SCRIPT = textwrap.dedent('''
    import json, sys, threading, numpy as np
    from querycompute.backends.cpu import numba_loader
    mod = numba_loader.load("qc_test_native", open(sys.argv[2]).read(), native=True)
    out = {"native": type(mod.ns).__name__ == "_NativeNamespace",
           "consts": [mod.ns["LIMIT"], int(mod.ns["SCALE"]), type(mod.ns["SCALE"]).__name__,
                      list(mod.ns["PAIR"])]}
    x = np.arange(-5, 20, dtype=np.int64) * 3
    s, head = mod.call("checked", x, 6)[0]
    out["ints"] = [int(s), head.tolist(), str(head.dtype)]
    results = [None] * 4

    def work(i):
        results[i] = mod.ns["checked"](x, i + 3)[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    out["threads"] = [int(r) for r in results]
    try:
        mod.call("checked", x, -1)
        out["raised"] = None
    except ValueError as exc:
        out["raised"] = str(exc)
    out["numba_free"] = "numba" not in sys.modules
    if sys.argv[1] in ("first", "more"):
        out["hashed"] = mod.call("hashed", 3)[0] == hash("kkk")
        out["fell_back"] = "numba" in sys.modules
        f = np.linspace(-1, 1, 9)
        out["floats"] = float(mod.call("checked", f, 9)[0][0]) == float(sum(f.tolist()))
    if sys.argv[1] == "floats":
        f = np.linspace(-1, 1, 9)
        out["floats"] = float(mod.call("checked", f, 9)[0][0]) == float(sum(f.tolist()))
        out["numba_free"] = "numba" not in sys.modules
    print(json.dumps(out))
''')


def _run(tmp_path, script, *args):
    env = {**os.environ, "QUERYCOMPUTE_CACHE_DIR": str(tmp_path / "c"), "QUERYCOMPUTE_TIERED": "0"}
    for k in [k for k in env if k.startswith("NUMBA_")] + ["QUERYCOMPUTE_CACHE"]:
        env.pop(k, None)
    out = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True,
                         text=True, timeout=600, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_raising_kernel_fallbacks_and_new_types(tmp_path):
    (tmp_path / "m.py").write_text(MODULE)
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    expect = {"consts": [7, 3, "uint64", [1, 2.5]], "ints": [-45, [-15, -12, -9, -6, -3, 0], "int64"],
              "threads": [-36, -42, -45, -45], "raised": "n must not be negative"}
    first = _run(tmp_path, script, "first", str(tmp_path / "m.py"))
    assert first == {**expect, "native": False, "numba_free": False, "hashed": True, "fell_back": True,
                     "floats": True}
    # numba's code of `hashed` names the hash secret (numba.cpython.hashing defines it): its
    # call falls back to numba's load; `checked` of float64 was compiled by the first process
    warm = _run(tmp_path, script, "floats", str(tmp_path / "m.py"))
    assert warm == {**expect, "native": True, "numba_free": True, "floats": True}
    more = _run(tmp_path, script, "more", str(tmp_path / "m.py"))
    assert more == {**expect, "native": True, "numba_free": True, "hashed": True, "fell_back": True,
                    "floats": True}
    # the payload: what it holds; one for another CPU is refused whole (numba's load instead)
    if native_loader.runtime() is None:
        return
    [path] = (tmp_path / "c").rglob("querycompute.native")
    data = path.read_bytes()
    assert native_loader.payload_index(data) == ["checked|afloat64:1Cwa;int64", "checked|aint64:1Cwa;int64",
                                                 "hashed|int64"]
    module = native_loader.NativeModule(data)
    assert module.consts == {"LIMIT": 7, "SCALE": np.uint64(3), "PAIR": (1, 2.5)}
    cpu = json.dumps(native_loader.runtime()["magic"][1]).encode()
    other = data.replace(cpu, b'"' + b"x" * (len(cpu) - 2) + b'"')       # the same length
    assert other != data and native_loader.payload_index(other) == native_loader.payload_index(data)
    with pytest.raises(native_loader.Unavailable):
        native_loader.NativeModule(other)


class _Sub(np.ndarray):
    pass


def test_fingerprints_are_numbas_types():
    """native_loader.of(value) equals of_type(numba.typeof(value)) wherever it is not None,
    and is None for what the route leaves to numba."""
    numba = pytest.importorskip("numba")
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    values = [a, a.T, a[:, ::2], a[0], ro, np.zeros(0, np.uint8), np.zeros(3, bool),
              np.zeros(2, np.complex64), True, np.bool_(False), 0, -1, 2**63 - 1, -2**63,
              2**63, 2**64 - 1, 1.5, float("nan"), np.float32(2), np.int8(-3), np.uint64(7),
              (1, 2), (1, 2.0), (np.int32(1), (2, a)), None, 1j]
    for v in values:
        fp = native_loader.of(v)
        assert fp is not None, v
        assert fp == native_loader.of_type(numba.typeof(v)), (v, fp, numba.typeof(v))
    for v in (2**64, "s", [1], np.zeros(2, ">i4"), np.zeros(2, "M8[s]"), np.zeros(2, [("a", "i4")]),
              np.zeros(2).view(_Sub), {}):
        assert native_loader.of(v) is None, v
    assert native_loader.fingerprint((a, 1)) == native_loader.of(a) + ";int64"
    assert native_loader.fingerprint((a, "s")) is None


def test_native_key_is_numbas_key():
    """The key the native route computes without numba is the one numba's load computes."""
    if native_loader.runtime() is None:
        pytest.skip("NUMBA_* settings in the environment: numba's own route")
    src = numba_loader.stage_kernels_source()
    assert numba_loader.cache_key(src, native=True) == numba_loader.cache_key(src)
    assert numba_loader.DEFAULT_OPTIONS == numba_loader.numba_options()


def test_damaged_payload_is_not_loaded():
    for data in (b"", b"QCNATIVE1\n", native_loader.MAGIC + b"\xff" * 8, b"\x7fELF" + bytes(60)):
        assert native_loader.payload_index(data) is None
        with pytest.raises(native_loader.Unavailable):
            native_loader.NativeModule(data)
