"""Where numba keeps the cache files of an entry's module: always beside the module, in the
entry's __pycache__/, the only place load_module verifies (numba's cache files are pickles).

numba itself picks the first place that works from a list: $NUMBA_CACHE_DIR, then beside the
module if that directory is writable, then its user-wide ~/.cache/numba. On a read-only cache
directory (or with NUMBA_CACHE_DIR set) it would quietly read and write pickles there, which
nothing verifies, while the trace said `disk`. `entry_cache` gives a function numba's own
cache machinery bound to the entry's __pycache__/ whatever the environment says: on a
read-only entry numba reads the sealed files load_module checked, and a save fails (the
guard in modules.py warns and the kernel stays in memory). numba is imported by the caller
(a module with numba functions was just executed), so importing it here costs nothing.
"""
from __future__ import annotations

import inspect
from functools import lru_cache


@lru_cache(maxsize=1)
def _function_cache_class():
    from numba.core import caching

    class EntryLocator(caching.InTreeCacheLocator):
        """numba's in-tree locator (`<module dir>/__pycache__`), also where it is read-only."""

        @classmethod
        def from_function(cls, py_func, py_file):
            locator = cls(py_func, py_file)
            try:
                locator.ensure_cache_path()
            except OSError:
                pass        # read-only: the sealed files are read; saving fails (warned)
            return locator

    class EntryCacheImpl(caching.CompileResultCacheImpl):
        def __init__(self, py_func):
            super().__init__(py_func)     # names the files as numba does
            # ...but they live beside the module, whatever numba's own search found
            self._locator = EntryLocator.from_function(py_func, inspect.getfile(py_func))

    class EntryFunctionCache(caching.FunctionCache):
        _impl_class = EntryCacheImpl

    return EntryFunctionCache


def entry_cache(dispatcher):
    """A numba cache for `dispatcher` (a function of an entry's module, not yet called) whose
    files are read from and written to the module's own __pycache__/ only (a function
    without cache=True keeps numba's NullCache)."""
    if type(dispatcher._cache).__name__ == "NullCache":
        return dispatcher._cache
    return _function_cache_class()(dispatcher.py_func)
