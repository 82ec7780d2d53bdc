# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""The kernel modules compiled with numba: the 'numba' backend's half of one source.

Each function of a kernel module is compiled as it is written. A kernel calls
other kernels through its module's global names; the compiled copy sees a copy
of those globals in which every kernel is replaced by its compiled twin, so
compiled code only calls compiled code (numba resolves the names when it
compiles, lazily, at the first call). Constants are the modules' own: numba
reads global numbers at compile time. Imported only when numba is installed.
"""

import hashlib
import os
from pathlib import Path
import types

from ik_node.core import kernels, limits, offset_kernels, srs_kernels
import numba

KERNEL_MODULES = (kernels, limits, srs_kernels, offset_kernels)
SOURCE_STAMP = 'numba-sources.sha256'


def drop_stale_cache(source_dir: Path, cache_dir: Path) -> bool:
    """Remove numba's cache files in cache_dir when any source in source_dir changed.

    numba keys a cached function on its own source file only, yet the
    machine code of a kernel includes the kernels it calls from other files:
    after one of those changes (an edit, a pull) the caller's cache would
    load with the old callee compiled in. A digest of every ``*.py`` of
    source_dir is kept next to the cache; when it differs, the ``*.nbi`` /
    ``*.nbc`` files go (numba compiles again, once). Returns True when files
    were removed. An unwritable directory is left as it is.
    """
    digest = hashlib.sha256(b''.join(path.read_bytes()
                                     for path in sorted(source_dir.glob('*.py')))).hexdigest()
    stamp = cache_dir / SOURCE_STAMP
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    try:
        stale = sorted(cache_dir.glob('*.nbi')) + sorted(cache_dir.glob('*.nbc'))
        for path in stale:
            path.unlink()
        cache_dir.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        return False
    return bool(stale)


if not os.environ.get('NUMBA_CACHE_DIR'):   # numba's default: __pycache__ beside the sources
    drop_stale_cache(Path(__file__).parent, Path(__file__).parent / '__pycache__')

_jit = numba.njit(cache=True, nogil=True)


def _kernel_functions(module):
    """Functions defined in ``module`` itself (not imported into it)."""
    return {name: fn for name, fn in vars(module).items()
            if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__}


def _compile_all(modules):
    twins = {}
    spaces = {}
    for module in modules:
        scope = dict(vars(module))
        # A module object: numba resolves attributes of modules when it compiles.
        space = types.ModuleType(f'{module.__name__} (compiled)')
        for name, fn in _kernel_functions(module).items():
            clone = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__,
                                       fn.__closure__)
            clone.__qualname__ = fn.__qualname__
            clone.__module__ = fn.__module__
            clone.__doc__ = fn.__doc__
            twins[id(fn)] = _jit(clone)
            setattr(space, name, twins[id(fn)])
        spaces[module.__name__] = (scope, space)
    # Every global name that refers to a kernel (its own module's or imported)
    # now refers to the compiled twin, before anything is compiled.
    for scope, _ in spaces.values():
        for name, value in list(scope.items()):
            if isinstance(value, types.FunctionType) and id(value) in twins:
                scope[name] = twins[id(value)]
    return {name: space for name, (_, space) in spaces.items()}


_SPACES = _compile_all(KERNEL_MODULES)
#: kernels.py compiled, function by function (same names).
K = _SPACES[kernels.__name__]
#: srs_kernels.py compiled, function by function (same names).
S = _SPACES[srs_kernels.__name__]
#: offset_kernels.py compiled, function by function (same names).
OW = _SPACES[offset_kernels.__name__]
#: limits.py compiled, function by function (same names).
L = _SPACES[limits.__name__]
