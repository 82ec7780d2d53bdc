# SPDX-License-Identifier: Apache-2.0
"""Solvers that can run now: the kernels uncompiled until numba has compiled them.

The choice of solver backend for a process that must never compile in a
tick (the node). :class:`SolverSupply` builds each solver
on numba once its kernels are compiled (or loaded from the cache) in this
process; until then on the numpy backend, while a child process compiles
them (:class:`ik_node.core.warm.KernelCompile`) and the tick switches the
tracker over at rest. Progress and outcome go to a logger (``info`` and
``warning`` taking one line, as rclpy's and logging's do).
"""

import sys
import time
from typing import Callable, Optional

from ik_node.core.ik.factory import make_solver, serving_solver
from ik_node.core.ik.task import POSE, Task
from ik_node.core.kernels.backend import compiled_status
from ik_node.core.model.chain import Chain
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.tracker import TrackerConfig
from ik_node.core.warm import kernel_key, KernelCompile
import numpy as np

# Seconds between two progress lines while the numba kernels compile.
COMPILE_PROGRESS_S = 5.0
# Python's GIL switch interval while kernels load in a thread beside the ticks, s.
COMPILE_SWITCH_INTERVAL_S = 0.0005


class SolverSupply:
    """Solvers on numba once compiled here, else on the numpy reference (module docstring).

    Args:
        logger: the node's logger (info, warning).
        solver_name: returns the solver parameter's value now.
        config: returns the tracker configuration of the parameters now (a
            compile warms its kernels up with it).

    Both are called only when a compile starts or a solver switches, never
    on a tick that has nothing to do (they read every parameter: ~5 us).

    Attributes:
        numba: numba is there and its kernels compile.
        warm: kernel_key()s compiled in this process.
        compiling: the background compile under way (KernelCompile), or None.

    """

    def __init__(self, logger, solver_name: Callable[[], str],
                 config: Callable[[], TrackerConfig]):
        """Nothing compiled yet; say once which backend runs."""
        self._logger = logger
        self._solver_name, self._config = solver_name, config
        self.numba = compiled_status()[0] == 'numba'
        self.warm: set = set()
        self.compiling: Optional[KernelCompile] = None
        self._progress_at = 0.0
        self._switch_interval = sys.getswitchinterval()   # restored after a compile
        self.log_backend()

    def log_backend(self) -> None:
        """Say once which IK backend runs (numpy is much slower per iteration)."""
        backend, why = compiled_status()
        if backend == 'numba':
            self._logger.info(
                'IK backend: numba (compiled kernels); on a first start they compile in a child '
                'process (about 13 s on an idle 2-core machine, longer on a busy one; ~0.7 s '
                'from the cache later) while the same kernels run uncompiled (collision '
                'checks then cost up to ~10x more per tick)')
            return
        self._logger.warning(
            f'IK backend: numpy, the uncompiled reference ({why}); every solve is '
            'correct but 20-150x slower, and with collision checking a tick may outlast its '
            'period: install numba and scipy (python3-numba, python3-scipy) for the compiled one')

    def ready(self, chain: Chain, name: str, q0, wait_s: float = 0.0, task: Task = POSE):
        """Return the solver ``name`` of ``chain`` for ``task`` that can run now, not compiling.

        Its numba twin once its kernels are compiled in this process. Else
        they are compiled in a child process: ready within ``wait_s`` (a warm
        cache), the numba twin; not, the numpy reference, and the tick
        switches when they are (switch_when_compiled). Raises ModelError
        like make_solver (a task other than the full pose is the Jacobian
        solver's: compiled as it is).
        """
        if not self.numba:   # numba missing (auto is numpy) or its compile failed
            return make_solver(chain, name, backend='numpy', task=task)
        reference = make_solver(chain, name, backend='numpy', task=task)
        key = kernel_key(reference, chain)
        if key in self.warm:
            return make_solver(chain, name, task=task)
        if self.compiling is None:
            job = KernelCompile(key, chain, serving_solver(name, task), q0,
                                self._config(), wait_s)
            self.compiling, self._progress_at = job, job.started
            # Its thread loads the kernels beside the ticks: hand the GIL over
            # every 0.5 ms, not 5 ms (it waited ~5 ms at each of many takes).
            sys.setswitchinterval(COMPILE_SWITCH_INTERVAL_S)
            if job.done:
                self.collect()
                if key in self.warm:
                    return make_solver(chain, name, task=task)
        return reference

    def tracker_backend(self) -> str:
        """Backend of the tracker's limiting step: numba once any compile is done."""
        return 'auto' if self.warm else 'numpy'

    def switch_when_compiled(self, session: Optional[MotionSession]) -> None:
        """Log a background compile's progress; with kernels ready, switch to numba at rest.

        The switch waits until the arm is at rest (every joint's velocity
        zero): a motion runs on one backend from its start to its end.
        """
        self.collect()
        if session is None or not self.warm or np.any(session.tracker.v != 0.0):
            return
        tracker = session.tracker
        if tracker.backend == 'numpy':   # its kernels are in the cache (compile_kernels)
            session.use_backend('auto')
        if tracker.solver.backend != 'numpy':
            return
        if kernel_key(tracker.solver, tracker.chain) not in self.warm:
            if self.compiling is None and self.numba:   # kernels of another solver class
                self.ready(tracker.chain, self._solver_name(), tracker.q,
                           task=tracker.solver.task)
            return
        solver = make_solver(tracker.chain, self._solver_name(), task=tracker.solver.task)
        solver.warm_up(tracker.q)
        session.use_solver(solver)
        self._logger.info(f'solver {solver.name}: numba from now on')

    def collect(self) -> None:
        """Log a running compile every COMPILE_PROGRESS_S; take in the result of a finished one."""
        job = self.compiling
        if job is None:
            return
        if not job.done:
            if time.monotonic() - self._progress_at >= COMPILE_PROGRESS_S:
                self._progress_at = time.monotonic()
                self._logger.info(f'compiling the numba kernels: {job.elapsed():.0f} s so '
                                  'far; the numpy reference serves meanwhile')
            return
        self.compiling = None
        sys.setswitchinterval(self._switch_interval)
        if job.error is not None:
            self.numba = False
            self._logger.warning(f'the numba kernels failed to compile ({job.error}); the '
                                 'numpy reference goes on (correct, slower per solve)')
            return
        self.warm.add(job.key)
        self._logger.info(f'numba kernels ready after {job.seconds:.1f} s (compiled or '
                          f'loaded by a child process in {job.child_seconds:.1f} s, '
                          'then loaded here); the switch waits for the arm at rest')
