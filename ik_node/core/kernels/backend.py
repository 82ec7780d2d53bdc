# SPDX-License-Identifier: Apache-2.0

"""Choice of implementation: the kernels run by CPython, or compiled by numba, made once.

:func:`resolve` turns ``'auto' | 'numpy' | 'numba'`` into a :class:`Backend`:
the kernel modules to call (the plain-Python sources run by CPython, or the
namespaces of the same sources compiled) and the containers those kernels take
(lists and tuples under CPython, where plain floats are fastest; arrays when
compiled). Solvers and the tracker resolve it once and keep it; no other
module decides numpy or numba.
"""

from dataclasses import dataclass, field
from typing import Any, Tuple

from ik_node.core.errors import InvalidInputError
from ik_node.core.kernels import base, follow, limits, lm, offset_wrist, proximity, srs
import numpy as np

BACKENDS = ('auto', 'numpy', 'numba')


@dataclass(frozen=True)
class Backend:
    """The kernels of one backend and the containers they take.

    Attributes:
        name: 'numba' or 'numpy' (what solvers report as ``backend``).
        base, srs, offset_wrist, limits, proximity, lm, follow: the kernel
            modules (numpy) or their compiled namespaces (numba), same
            function names (lm: the Levenberg-Marquardt descent; follow: the
            local steps toward a moving pose).

    """

    name: str
    base: Any
    srs: Any
    offset_wrist: Any
    limits: Any
    proximity: Any
    lm: Any
    follow: Any
    compiled: bool = field(init=False)   # the numba backend (an attribute: read per call)

    def __post_init__(self):
        """Set ``compiled`` from the name."""
        object.__setattr__(self, 'compiled', self.name == 'numba')

    def fk(self, chain) -> Any:
        """Return the chain's kinematic tables as these kernels take them."""
        return chain.fk_arrays if self.compiled else chain.fk_tables

    def rows(self, count: int, width: int) -> Any:
        """Return scratch rows for a kernel: an array compiled, a list under CPython."""
        return np.empty((count, width)) if self.compiled else [None] * count

    def zeros(self, count: int) -> Any:
        """Return a 1-D output of ``count`` zeros: an array compiled, a list under CPython."""
        return np.zeros(count) if self.compiled else [0.0] * count

    def empty(self, count: int) -> Any:
        """Return a 1-D output of ``count`` values to be written: np.empty, or a list of zeros."""
        return np.empty(count) if self.compiled else [0.0] * count

    def arg(self, array) -> Any:
        """Return an array argument as the kernels take it (compiled: itself; CPython: lists)."""
        return array if self.compiled else array.tolist()

    def table(self, array, as_tuple: tuple) -> Any:
        """Return a model table: a contiguous array compiled (one unboxing), else as_tuple."""
        return np.ascontiguousarray(array) if self.compiled else as_tuple


NUMPY = Backend('numpy', base, srs, offset_wrist, limits, proximity, lm, follow)


def resolve(backend: str = 'auto') -> Backend:
    """Return the Backend that ``backend`` ('auto', 'numpy' or 'numba') asks for.

    'auto' is numba when it imports, else numpy.

    Raises:
        InvalidInputError: an unknown backend, or 'numba' when numba is missing.

    """
    if backend not in BACKENDS:
        raise InvalidInputError(f'backend: expected one of {", ".join(BACKENDS)}, '
                                f'received {backend!r}')
    if backend == 'numpy':
        return NUMPY
    reason = _compiled_missing()
    if reason:
        if backend == 'numba':
            raise InvalidInputError(f"backend 'numba' is not available: {reason}")
        return NUMPY
    from ik_node.core.kernels import compile as compiled
    return Backend('numba', compiled.K, compiled.S, compiled.OW, compiled.L, compiled.P,
                   compiled.LM, compiled.F)


def compiled_status() -> Tuple[str, str]:
    """Return ('numba', '') when the compiled kernels load, else ('numpy', the reason).

    What ``backend='auto'`` picks: the node logs it once at start-up.
    """
    reason = _compiled_missing()
    return ('numpy', reason) if reason else ('numba', '')


def _compiled_missing() -> str:
    """Return why the compiled kernels cannot run ('' when they can).

    They need numba, and numba's linear algebra (the SVD of the local step,
    kernels/follow.py) binds LAPACK through scipy: numba imports without scipy
    and fails only when a kernel using np.linalg is first compiled, inside the
    warm-up. Both are checked here, before anything compiles.
    """
    try:
        from ik_node.core.kernels import compile as _compiled  # noqa: F401 - imports numba
    except ImportError as exc:
        return f'numba cannot be imported: {exc}'
    try:
        import scipy.linalg.cython_lapack  # type: ignore[import-untyped]  # noqa: F401
    except ImportError as exc:
        return f'numba needs scipy for its linear algebra, which cannot be imported: {exc}'
    return ''
