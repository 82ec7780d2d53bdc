# SPDX-License-Identifier: Apache-2.0

"""The numba kernels compiled off the control thread, while the same kernels run uncompiled.

numba compiles a kernel at its first call: about 10 s for a 7-DoF arm's
set on an idle 2-core machine, a minute or more on a loaded one, then
~0.3 s to load it from the cache on later starts. A node that compiled
before its first tick published nothing for that long. Instead it starts on
the numpy backend (the same kernels run by CPython: same answers, slower)
and :class:`KernelCompile` compiles every path of the same model in a child
interpreter (``python -m ik_node.core.warm``), which fills numba's cache;
a thread of the caller then loads the kernels from that cache. When it is
done the caller switches the tracker to the compiled kernels between two
ticks. A child, not a thread, compiles: numba's compiler is Python, and
beside a control loop that holds the GIL most of the time (the uncompiled
kernels) a compiling thread took minutes instead of 10 s.
"""

import ctypes
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Hashable, Optional

from ik_node.core.ik.factory import IKSolver, make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
import numpy as np


def kernel_key(solver: IKSolver, chain: Chain) -> Hashable:
    """Return what decides which kernels ``solver`` compiles: its class and the joint count.

    numba compiles per argument types, not per model: two chains with as
    many joints and a solver of the same class run the same machine code.
    """
    return type(solver).__name__, chain.n


def compile_kernels(chain: Chain, solver_name: str, q0, config: TrackerConfig) -> None:
    """Run once every compiled path of a tracker of ``chain`` with solver ``solver_name``.

    Compiles the kernels (or loads them from numba's cache): the solver's
    warm-up paths, then one limiting step of a tracker on the 'numba'
    backend toward a target a little away from q0 (n,), rad.

    Raises:
        IKError: the solver cannot be built for the chain.

    """
    solver = make_solver(chain, solver_name, backend='numba')
    q0 = np.asarray(q0, dtype=np.float64)
    solver.warm_up(q0)
    tracker = MotionTracker(chain, solver, config, q0, 0.0, backend='numba')
    aim = np.clip(q0 + 0.05, chain.lower, chain.upper)
    tracker.add_target(0.0, chain.forward(aim))
    tracker.command(0.01)
    compile_collision_kernels(chain, q0)


def compile_collision_kernels(chain: Chain, q0) -> None:
    """Run the guarded step's paths once, through the calls a tick makes: nothing listed by hand.

    A sphere on the first and the last joint frame and a box at the tip;
    a guard whose margin holds every pair inside it judges a step from q0
    (n,) rad and its reverse, moving and at rest (some are refused: the
    braking path, its pieces, the remembered bounds), slides the goal (both
    metrics) and
    judges with no margin (the remembered bounds clear it). The kernels
    compile per argument types, not per geometry: any model of a chain of
    as many joints runs the same machine code; a test runs a tick after
    this and finds nothing left to compile. Nothing when coal (optional:
    collision checking needs it) is missing.
    """
    try:
        import coal  # noqa: F401 - CollisionModel imports it when built
    except ImportError:
        return
    from ik_node.core.collision.guard import CollisionGuard
    from ik_node.core.collision.model import Body, CollisionModel
    from ik_node.core.collision.shapes import checked_shape
    q0 = np.asarray(q0, dtype=np.float64)
    ball = (checked_shape('sphere', (0.05,), source='warm-up'),)
    bodies = [Body('warm_first', 0, np.eye(4), ball), Body('warm_last', chain.n - 1, np.eye(4),
                                                           ball)]
    model = CollisionModel(chain, bodies, backend='numba')
    box = np.eye(4)
    box[:3, 3] = chain.forward(q0)[:3, 3]
    model.set_obstacles({'warm': (checked_shape('box', (0.1, 0.1, 0.1), box,
                                                source='warm-up'),)})
    model.distances(q0, 10.0, -1.0)   # every pair by its bounding spheres' witnesses
    guard = CollisionGuard(model, 10.0)   # every pair inside the margin
    a_max, lower, upper = np.full(chain.n, 5.0), chain.lower, chain.upper
    for v in (np.full(chain.n, 0.5), np.full(chain.n, -0.5)):
        q1 = np.clip(q0 + 0.01 * v, lower, upper)
        # Moving (braking dips with the gradients) and arriving at rest (gradients alone).
        for v1 in (v, np.zeros(chain.n)):
            guard.changed()   # nothing remembered: each judged afresh
            refusal = guard.judge(q0, q1, v1, a_max, lower, upper)
            if refusal is not None:
                guard.slid_goal(q0, q1, refusal)
                guard.slid_goal(q0, q1, refusal, np.eye(chain.n))
    guard.set_margin(0.0)
    guard.judge(q0, q0, np.zeros(chain.n), a_max, lower, upper)


def die_with_parent() -> Callable[[], None]:
    """Return a ``preexec_fn`` for children that must not outlive this process (Linux).

    In the child, before exec, it asks for SIGTERM when the thread that
    started the child ends: the child of a process that is killed (SIGKILL, a
    CI timeout) would otherwise run on with no parent. When this process has
    already died between the fork and that request (no signal would come),
    the child ends at once. Elsewhere than Linux: nothing.
    """
    parent = os.getpid()

    def arm() -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:
            os._exit(1)

    return arm


class KernelCompile:
    """:func:`compile_kernels` in a child interpreter, then loaded here from numba's cache.

    The child starts at once. When it ends within ``wait_s`` (the cache was
    warm: ~0.7 s) the kernels are loaded here before the constructor
    returns; otherwise a daemon thread waits for it and loads them, and the
    caller polls :attr:`done`. :meth:`cancel` stops the child (it also gets
    SIGTERM when the thread that started it ends).

    Args:
        key: what the compiled kernels serve (:func:`kernel_key`).
        chain, solver_name, q0, config: as for :func:`compile_kernels`.
        wait_s: how long to wait for the child here, s.

    Attributes:
        started: time.monotonic() at the start, s.
        child_seconds: how long the child took (None while it runs).
        seconds: how long it took in all (None while it runs).
        error: the exception it raised, if any.

    """

    def __init__(self, key: Hashable, chain: Chain, solver_name: str, q0,
                 config: TrackerConfig, wait_s: float = 0.0):
        """Start the child; load here if it ends within wait_s, else in a thread."""
        self.key = key
        self.started = time.monotonic()
        self.seconds: Optional[float] = None
        self.child_seconds: Optional[float] = None
        self.error: Optional[BaseException] = None
        self._cancelled = False
        self._thread: Optional[threading.Thread] = None
        args = (chain, solver_name, np.array(q0, dtype=float), config)
        self._child = subprocess.Popen(
            [sys.executable, '-m', 'ik_node.core.warm'], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=die_with_parent())
        data = pickle.dumps(args)
        try:
            err = self._child.communicate(data, timeout=wait_s)[1]
        except subprocess.TimeoutExpired:
            # The thread gets its own copy of the model: nothing shared with the ticks.
            self._thread = threading.Thread(target=self._finish, daemon=True,
                                            args=(None, pickle.loads(data)),
                                            name='ik_node-compile')
            self._thread.start()
            return
        self._finish(err, args)

    def _finish(self, err: Optional[bytes], args) -> None:
        """Wait for the child (unless it ended with stderr ``err``), then load its kernels."""
        try:
            if err is None:
                err = self._child.communicate()[1]
            self.child_seconds = time.monotonic() - self.started
            if self._child.returncode != 0 and not self._cancelled:
                lines = err.decode(errors='replace').strip().splitlines() or ['no message']
                raise RuntimeError(f'the compiling process exited with code '
                                   f'{self._child.returncode}: {lines[-1]}')
            if not self._cancelled:
                compile_kernels(*args)   # loads from the cache the child wrote
        except Exception as exc:  # noqa: B902 - reported by the caller, numpy goes on
            self.error = exc
        self.seconds = time.monotonic() - self.started

    def cancel(self) -> None:
        """Stop the compiling child (what it cached so far stays valid)."""
        self._cancelled = True
        if self._child is not None and self._child.poll() is None:
            self._child.kill()
            self._child.wait()

    @property
    def done(self) -> bool:
        """Whether compiling and loading have finished (successfully or not)."""
        return self._thread is None or not self._thread.is_alive()

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.started


class ThreadWarmUp:
    """``solver.warm_up(*args)`` in a daemon thread beside the ticks; the tick takes it when done.

    A solver built on numba loads its kernels at their first call: warmed
    up inside a tick, a stacked solver of two arms took 0.3-0.5 s (a
    trajectory controller refused messages that arrived after their last
    point). Here the tick goes on meanwhile; while the thread runs, Python
    hands the GIL over every ``switch_interval_s`` (numba holds it while it
    loads), and :meth:`finished` puts the interval back.

    Attributes:
        solver: the solver warmed up (use it once finished() and no error).
        error: the exception warm_up raised, or None.

    """

    def __init__(self, solver, *args, switch_interval_s: float = 0.0005):
        """Start the thread at once."""
        self.solver = solver
        self.error: Optional[BaseException] = None
        self._interval: Optional[float] = sys.getswitchinterval()
        sys.setswitchinterval(switch_interval_s)
        self._thread = threading.Thread(target=self._run, args=args, daemon=True,
                                        name='ik_node-warm-up')
        self._thread.start()

    def _run(self, *args) -> None:
        """Warm the solver up; keep the exception, if any."""
        try:
            self.solver.warm_up(*args)
        except Exception as exc:  # noqa: B902 - reported by the caller, which keeps its solver
            self.error = exc

    def finished(self) -> bool:
        """Return whether the warm-up has ended; when it has, the switch interval is put back."""
        if self._thread.is_alive():
            return False
        if self._interval is not None:
            sys.setswitchinterval(self._interval)
            self._interval = None
        return True


def _compile_from_stdin() -> int:
    """Child side of KernelCompile: compile_kernels of the pickled arguments on stdin."""
    compile_kernels(*pickle.loads(sys.stdin.buffer.read()))   # our own parent's bytes
    return 0


if __name__ == '__main__':
    sys.exit(_compile_from_stdin())
