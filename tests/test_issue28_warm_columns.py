"""Issue 28: the first call of a column operation with a warm disk cache (group_by, a sort's
top-k, a join: cold_start.py's G, K, J).

Their numba modules load from the disk cache without numba's refresh of its target context
(cache/modules.py, EntryFunctionCache.load_overload: the refresh imports every typing and
lowering registry numba has, ~120 ms of a first call, which loading machine code does not
need). A fresh process over a warm cache gives the numpy backend's bits, reads every kernel
from the disk, and never imports those registries; a compile after such loads in the same
process (numba's compiler refreshes the contexts itself) still works, including a new module
whose functions call the loaded kernels. filelock (the disk cache's compile lock) is imported
by the first compile that misses, not by a disk hit (locks.import_for_compile). Nor is numba
itself: the warm loads go through native_loader.py (test_issue28_native_load.py)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from querycompute.cache import modules

SCRIPT = textwrap.dedent('''
    import json, sys, numpy as np, querycompute as qc
    n = 100_000
    rng = np.random.default_rng(0)
    cat = rng.integers(-500, 500, n, dtype=np.int32)
    price = (rng.random(n, dtype=np.float32) * 2000).astype(np.float64)   # sums exact in any order
    price[::997] = np.nan
    keys = np.arange(-500, 500, dtype=np.int32)

    def cases(backend):
        g = (qc.query(cat=cat, price=price).on(backend).group_by(lambda r: r.cat)
             .agg(total=qc.sum(lambda r: r.price), n=qc.count))
        k = qc.query(price).on(backend).order_by(lambda v: v).take(10).to_array()
        dims = qc.query(k=keys, w=keys.astype(np.float64))
        j = (qc.query(cat=cat, price=price).on(backend)
             .join(dims, lambda r: r.cat, lambda d: d.k, lambda r, d: r.price * d.w).sum())
        e = qc.query(price[:0]).on(backend).order_by(lambda v: v).take(10).to_array()
        return [g["key"], g["total"], g["n"], k, np.asarray(j), e]

    def bits(a, b):     # the same bits; a NaN's payload aside (a NaN sum is a NaN either way)
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind != "f":
            return a.tobytes() == b.tobytes()
        nan = np.isnan(a)
        return bool((nan == np.isnan(b)).all()) and a[~nan].tobytes() == b[~nan].tobytes()

    got = cases("cpu")
    light = "numba.np.npyimpl" not in sys.modules      # numba's registries never imported
    lockless = "filelock" not in sys.modules            # nor the compile lock's module
    numba_free = "numba" not in sys.modules             # nor numba (native_loader.py)
    want = cases("numpy")
    same = all(bits(a, b) for a, b in zip(got, want))
    if sys.argv[1] == "more":
        # compiles after the light loads: a new group_by module calling the loaded kernels,
        # a fused pass on the numba route (pow is not printed as LLVM IR)
        g = (qc.query(cat=cat, price=price).on("cpu").group_by(lambda r: r.cat)
             .agg(hi=qc.max(lambda r: r.price)))
        h = (qc.query(cat=cat, price=price).on("numpy").group_by(lambda r: r.cat)
             .agg(hi=qc.max(lambda r: r.price)))
        same = same and bits(g["hi"], h["hi"])
        clean = price[~np.isnan(price)]
        p = qc.query(clean).on("cpu").select(lambda v: v ** 2).sum()
        same = same and float(p) == float(qc.query(clean).on("numpy").select(lambda v: v ** 2).sum())
    print(json.dumps({"same": same, "light": light, "lockless": lockless, "numba_free": numba_free}))
''')


def _run(tmp_path, arg, env):
    out = subprocess.run([sys.executable, str(tmp_path / "s.py"), arg], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_warm_cache_column_operations_load_without_numba_registries(tmp_path):
    (tmp_path / "s.py").write_text(SCRIPT)
    env = {**os.environ, "QUERYCOMPUTE_CACHE_DIR": str(tmp_path / "c"), "QUERYCOMPUTE_TIERED": "0"}
    env.pop("QUERYCOMPUTE_CACHE", None)
    first = _run(tmp_path, "plain", env)            # compiles: the registries are imported
    assert first == {"same": True, "light": False, "lockless": False, "numba_free": False}
    warm = _run(tmp_path, "plain", env)             # every kernel from the disk cache
    assert warm == {"same": True, "light": True, "lockless": True, "numba_free": True}
    more = _run(tmp_path, "more", env)              # then compiles in the same process
    assert more["same"], more


_DEFINED = __import__("ctypes").c_int64(0)


def _object(ir: str) -> bytes:
    from llvmlite import binding as ll
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    machine = ll.Target.from_default_triple().create_target_machine()
    return machine.emit_object(ll.parse_assembly(ir))


def test_code_naming_an_undefined_symbol_gets_the_full_refresh():
    """A cached specialisation whose object code names a symbol the process does not define
    (as the hash secret's before numba.cpython.hashing is imported) gets numba's full refresh
    (MCJIT would link it to address 0); code naming only defined symbols does not; a payload
    that is not an ELF64 object always does."""
    if sys.platform != "linux":
        pytest.skip("reads ELF objects")
    body = "define i64 @f(i64 %x) {\n  %r = call i64 @SYM(i64 %x)\n  ret i64 %r\n}\n"
    unknown = _object("declare i64 @_qc_no_such_symbol(i64)\n" + body.replace("SYM", "_qc_no_such_symbol"))
    import ctypes
    from llvmlite import binding as ll
    ll.add_symbol("_qc_defined_symbol", ctypes.addressof(_DEFINED))      # as numba's helpers are
    known = _object("declare i64 @_qc_defined_symbol(i64)\n" + body.replace("SYM", "_qc_defined_symbol"))
    assert modules.elf_undefined(unknown) == ["_qc_no_such_symbol"]
    assert modules._needs_refresh((("lib", "object", (unknown, b"bc")), None))
    assert not modules._needs_refresh((("lib", "object", (known, b"bc")), None))
    assert modules._needs_refresh((("lib", "object", (b"not an object", b"bc")), None))
    assert modules._needs_refresh(("not a payload",))
