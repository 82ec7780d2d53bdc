# SPDX-License-Identifier: Apache-2.0

"""The kernel modules compiled with numba: the 'numba' backend's half of one source.

Each function of a kernel module is compiled as it is written. A kernel calls
other kernels through its module's global names; the compiled copy sees a copy
of those globals in which every kernel is replaced by its compiled twin, so
compiled code only calls compiled code (numba resolves the names when it
compiles, lazily, at the first call). Constants are the modules' own: numba
reads global numbers at compile time. Imported only when numba is installed.

The machine code is cached in the user's cache directory (XDG:
``$XDG_CACHE_HOME/ik_node/numba``, by default ``~/.cache/ik_node/numba``),
not beside the sources: an install directory the user cannot write (a
binary package under /opt/ros) would otherwise compile again at every
start. ``NUMBA_CACHE_DIR``, when set, is used as it is.
"""

import hashlib
import os
from pathlib import Path
import sys
import tempfile
import types

from ik_node.core.kernels import base as kernels
from ik_node.core.kernels import follow, limits, lm
from ik_node.core.kernels import offset_wrist as offset_kernels
from ik_node.core.kernels import proximity
from ik_node.core.kernels import srs as srs_kernels
KERNEL_MODULES = (kernels, limits, srs_kernels, offset_kernels, proximity, lm, follow)
SOURCE_STAMP = 'numba-sources.sha256'
# The sources the compiled code depends on: this folder (every kernel, and every
# constant a kernel reads, lives here), so an edit elsewhere in the core keeps the cache.
KERNEL_DIR = Path(__file__).resolve().parent


def drop_stale_cache(sources, cache_dir: Path) -> bool:
    """Remove numba's cache files in cache_dir when any source under ``sources`` changed.

    numba keys a cached function on its own source file only, yet the
    machine code of a kernel includes the kernels it calls from other files
    and the constants it reads from other modules: after one of those changes
    (an edit, a pull) the caller's cache would load with the old callee
    compiled in. A digest of every ``*.py`` under ``sources`` (a folder, or a
    list of folders, searched recursively) is kept next to the cache; when it
    differs, the ``*.nbi`` / ``*.nbc`` files go (numba compiles again, once).
    Returns True when files were removed. An unwritable directory is left as
    it is.
    """
    folders = [sources] if isinstance(sources, Path) else list(sources)
    digest = hashlib.sha256(b''.join(path.read_bytes() for folder in folders
                                     for path in sorted(folder.rglob('*.py')))).hexdigest()
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
        cache_dir.mkdir(parents=True, exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        return False
    return bool(stale)


def user_cache_root(environ=os.environ) -> Path:
    """Return the folder of ik_node's numba cache: XDG's user cache directory + ik_node/numba.

    ``$XDG_CACHE_HOME`` when it is an absolute path (the XDG base directory
    specification ignores a relative one), else ``~/.cache``. When that
    cannot be created or written (a read-only home), a per-user folder in the
    system's temporary directory.
    """
    xdg = environ.get('XDG_CACHE_HOME', '')
    home = environ.get('HOME') or str(Path.home())
    base = Path(xdg) if os.path.isabs(xdg) else Path(home) / '.cache'
    root = base / 'ik_node' / 'numba'
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK | os.X_OK):
            return root
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f'ik_node-numba-{os.getuid()}'


def cache_subfolder(root: Path, source_dir: Path) -> Path:
    """Return where numba caches the functions of source_dir's files under root.

    numba's own rule for a cache directory it is given (NUMBA_CACHE_DIR):
    the source folder's name, '_', the SHA-1 of its absolute path.
    """
    folder = os.path.abspath(source_dir)
    digest = hashlib.sha1(folder.encode()).hexdigest()
    return root / f'{os.path.basename(folder)}_{digest}'


def use_user_cache() -> Path:
    """Point numba's cache at the user's cache directory (unless NUMBA_CACHE_DIR is set).

    Called before numba is imported (numba reads NUMBA_CACHE_DIR when it is
    imported; when something imported it earlier, its config is set as
    well). Returns the folder of this package's kernels there, with stale
    machine code dropped (drop_stale_cache).
    """
    root = os.environ.get('NUMBA_CACHE_DIR')
    if not root:
        root = str(user_cache_root())
        os.environ['NUMBA_CACHE_DIR'] = root
        numba_module = sys.modules.get('numba')
        if numba_module is not None:
            numba_module.config.CACHE_DIR = root
    return cached_folder_of(Path(__file__).parent)


def cached_folder_of(source_dir: Path, *depends: Path) -> Path:
    """Return where numba caches source_dir's functions, its stale machine code dropped.

    Stale: any source of the kernels (KERNEL_DIR) or of ``depends`` changed
    (drop_stale_cache). Call after use_user_cache (numba's cache directory set).
    """
    folder = cache_subfolder(Path(os.environ['NUMBA_CACHE_DIR']), source_dir)
    drop_stale_cache([KERNEL_DIR, *depends], folder)
    return folder


#: Where the machine code of the kernels is cached.
CACHE_FOLDER = use_user_cache()

import numba  # noqa: E402,I100,I202 - after NUMBA_CACHE_DIR is set

_jit = numba.njit(cache=True, nogil=False)


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
#: proximity.py compiled, function by function (same names).
P = _SPACES[proximity.__name__]
#: lm.py compiled, function by function (same names).
LM = _SPACES[lm.__name__]
#: follow.py compiled, function by function (same names).
F = _SPACES[follow.__name__]
