# SPDX-License-Identifier: Apache-2.0
"""The worker and the bounded tick: open-ended questions answered beside it, goals held.

What must hold (issue 50): the tick never runs a full solve (its searches,
restarts, fallback polishes) nor a free-solution search, however the worker
is run; the newest question wins and an answer to an older one is not
taken; a thread's answer comes from its own solver and its own copy of the
collision world, which follows the tick's obstacles and margin; a pose at
rest is held, so the arm comes to rest with no motion left.
"""

import time

from ik_node.core.ik.base import IKResult
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.motion.worker import DeferredWorker, ImmediateWorker, Question, \
    ThreadWorker, twin_solver
from ik_node.description.urdf import bundled_urdf
from models import TEST
import numpy as np
import pytest

Q0 = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0])
PERIOD = 0.01
KUKA = TEST / 'urdf_corpus' / 'external' / 'kuka_iiwa14_r820.urdf'


def iiwa():
    """Return the bundled iiwa14's chain."""
    return Chain.from_urdf_file(bundled_urdf('iiwa14.urdf'), 'iiwa_link_0', 'tool0')


def kuka():
    """Return ROS-Industrial's iiwa 14 (joints 0.436 mm off: the near-SRS closed form)."""
    return Chain.from_urdf_string(KUKA.read_text(), 'base_link', 'tool0')


class Counting:
    """Wraps a solver: counts full solves and bounded ones, and where they ran."""

    def __init__(self, solver):
        """Wrap ``solver``; nothing counted yet."""
        self._solver = solver
        self.full, self.quick, self.in_tick = 0, 0, 0
        self.ticking = False
        self.name, self.backend, self.uses_pole = solver.name, solver.backend, solver.uses_pole
        self.chain = solver.chain

    def solve(self, target, q_reference=None, *, pole=None):
        """Count the full solves and those a tick ran, then run this one."""
        self.full += 1
        self.in_tick += self.ticking
        return self._solver.solve(target, q_reference, pole=pole)

    def solve_quick(self, target, q_reference, *, pole=None):
        """Count a bounded solve, then solve."""
        self.quick += 1
        return self._solver.solve_quick(target, q_reference, pole=pole)

    def __getattr__(self, name):
        """Return the wrapped solver's attribute."""
        return getattr(self._solver, name)


def question(chain, solver, pose, key=('k',), start=Q0):
    """Return a Question on pose from ``start`` (no world)."""
    return Question(key, pose, pose, np.array(start, dtype=float), None, solver)


def moved(chain, dq):
    """Return the tip pose of Q0 + dq within the limits."""
    return chain.forward(np.clip(Q0 + dq, chain.lower, chain.upper))


def test_an_immediate_worker_answers_as_asked_a_deferred_one_only_when_run():
    chain = iiwa()
    solver = make_solver(chain)
    pose = moved(chain, np.full(7, 0.1))
    now = ImmediateWorker()
    now.ask(question(chain, solver, pose))
    answer = now.poll()
    assert answer is not None and answer.solves and now.poll() is None
    np.testing.assert_allclose(chain.forward(answer.goal), pose, atol=1e-9)
    later = DeferredWorker()
    later.ask(question(chain, solver, moved(chain, np.full(7, -0.2)), ('old',)))
    later.ask(question(chain, solver, pose, ('new',)))   # the newest wins
    assert later.busy and later.poll() is None
    later.run()
    answer = later.poll()
    assert answer.key == ('new',) and later.poll() is None and not later.busy


def test_a_thread_solves_with_a_twin_of_the_ticks_solver_and_answers_the_newest():
    chain = iiwa()
    solver = make_solver(chain)
    twin = twin_solver(solver)
    assert twin is not solver and type(twin) is type(solver) and twin.backend == solver.backend
    worker = ThreadWorker()
    try:
        for k in range(5):
            worker.ask(question(chain, solver, moved(chain, np.full(7, 0.05 * k)), (k,)))
        assert worker.wait_idle(30.0)
        answer = worker.poll()
        assert answer.key == (4,) and answer.solves
        np.testing.assert_allclose(chain.forward(answer.goal), moved(chain, np.full(7, 0.2)),
                                   atol=1e-9)
        assert worker.engine.solver_for(solver) is not solver
    finally:
        worker.stop()
    assert not worker._thread.is_alive()


class Slow:
    """A solver whose solve passes the engine's checkpoint ``steps`` times, counting them."""

    def __init__(self, chain, engine, steps):
        """Make each solve pass ``steps`` checkpoints of ``engine``."""
        self.chain, self.engine, self.steps = chain, engine, steps
        self.passed, self.name, self.backend, self.budget_s = 0, 'slow', 'numpy', None
        self.uses_pole = False

    def solve(self, target, q_reference=None, *, pole=None):
        """Pass the checkpoint ``steps`` times, 1 ms apart; answer the reference."""
        for _ in range(self.steps):
            self.engine.checkpoint()
            self.passed += 1
            time.sleep(0.001)
        return IKResult(np.array(q_reference), True, 0.0, 0.0)


def test_a_paused_thread_waits_at_its_checkpoint_and_a_newer_question_abandons_the_old():
    chain = iiwa()
    worker = ThreadWorker()
    slow = Slow(chain, worker.engine, 10_000)
    worker.engine.solver_for = lambda solver: solver   # the fake solver as it is
    try:
        worker.ask(question(chain, slow, chain.forward(Q0), ('slow',)))
        deadline = time.monotonic() + 10.0
        while slow.passed < 5 and time.monotonic() < deadline:
            time.sleep(0.001)
        with worker.pause():
            time.sleep(0.01)          # the step under way ends; then it waits
            held = slow.passed
            time.sleep(0.1)
            assert slow.passed <= held + 1, (held, slow.passed)
        fast = Slow(chain, worker.engine, 1)
        worker.ask(question(chain, fast, chain.forward(Q0), ('fast',)))
        assert worker.wait_idle(10.0)
        answer = worker.poll()
        assert answer.key == ('fast',) and slow.passed < slow.steps   # 'slow' was abandoned
    finally:
        worker.stop()


class Busy:
    """A solver that computes for ``seconds`` (linear algebra: it releases the GIL often).

    Before each checkpoint it notes the clock and when the worker meant to
    hand the GIL over next; after it, whether the worker slept.
    """

    def __init__(self, chain, worker, seconds, sleeps):
        """Compute for ``seconds`` per solve; ``sleeps`` counts the worker's hand-overs."""
        self.chain, self.worker, self.seconds, self.sleeps = chain, worker, seconds, sleeps
        self.name, self.backend, self.budget_s, self.uses_pole = 'busy', 'numpy', None, False
        self.due_missed, self.checkpoints = 0, 0

    def solve(self, target, q_reference=None, *, pole=None):
        """Checkpoint between SVDs until ``seconds`` have passed; answer the reference."""
        matrix = np.arange(42.0).reshape(6, 7)
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            due, before = self.worker._hand_over_at, len(self.sleeps)
            now = time.perf_counter()
            self.worker.engine.checkpoint()
            self.checkpoints += 1
            if now >= due and len(self.sleeps) == before:
                self.due_missed += 1
            for _ in range(20):
                np.linalg.svd(matrix)
        return IKResult(np.array(q_reference), True, 0.0, 0.0)


def test_a_busy_thread_hands_the_gil_over_at_its_first_checkpoint_after_each_period(
        monkeypatch):
    """A worker's tight loop of GIL releases starved the tick's thread: it must sleep."""
    from ik_node.core.motion import worker as worker_module
    sleeps = []

    class Clock:
        perf_counter = staticmethod(time.perf_counter)
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(seconds):
            sleeps.append(seconds)
            time.sleep(seconds)

    monkeypatch.setattr(worker_module, 'time', Clock)
    chain = iiwa()
    worker = ThreadWorker()
    busy = Busy(chain, worker, 0.1, sleeps)
    worker.engine.solver_for = lambda solver: solver
    try:
        worker.ask(question(chain, busy, chain.forward(Q0), ('busy',)))
        assert worker.wait_idle(30.0)
        assert worker.poll().key == ('busy',)
    finally:
        worker.stop()
    # 0.1 s of work in periods of HAND_OVER_EVERY_S: many hand-overs, none late.
    assert busy.due_missed == 0, (busy.due_missed, busy.checkpoints)
    assert len(sleeps) >= 10 and set(sleeps) == {worker_module.HAND_OVER_S}


def test_a_failing_engine_answers_with_the_start_held_and_the_reason():
    chain = iiwa()

    class Broken:
        name, backend, budget_s, uses_pole = 'broken', 'numpy', None, False

        def __init__(self):
            self.chain = chain

        def solve(self, *args, **kwargs):
            raise ValueError('no way')

    worker = ThreadWorker()
    worker.engine.solver_for = lambda solver: solver
    try:
        worker.ask(question(chain, Broken(), chain.forward(Q0), ('b',)))
        assert worker.wait_idle(10.0)
        answer = worker.poll()
        assert not answer.solves and 'no way' in answer.error and worker.errors == 1
        np.testing.assert_array_equal(answer.goal, Q0)
    finally:
        worker.stop()


def counted_tick(session, solver, now):
    """Tick at ``now`` (s) with the Counting solver told a tick runs; return the next instant."""
    solver.ticking = True
    session.tick(now)
    solver.ticking = False
    return now + PERIOD


@pytest.mark.parametrize('make_chain', [iiwa, kuka], ids=['iiwa14', 'near-SRS iiwa14'])
def test_the_tick_never_runs_a_full_solve_and_a_pose_at_rest_ends_with_the_arm_still(make_chain):
    """Targets and a 20 Hz stream, the worker deferred: full solves only in run(), never a tick."""
    chain = make_chain()
    solver = Counting(make_solver(chain))
    worker = DeferredWorker()
    q0 = np.clip(Q0, chain.lower, chain.upper)
    tracker = MotionTracker(chain, solver, TrackerConfig(), q0, 0.0, worker=worker)
    session = MotionSession(tracker, PERIOD, 2 * PERIOD, 500.0, own_robot=True)
    rng = np.random.default_rng(4)
    now, targets = 0.0, []
    for k in range(4):
        goal = np.clip(q0 + rng.uniform(-0.5, 0.5, 7), chain.lower, chain.upper)
        targets.append(chain.forward(goal))
    for k, target in enumerate(targets):
        if k % 2:      # a stream: 20 Hz along a short line to the target
            start = chain.forward(tracker.q)
            for j in range(1, 21):
                pose = target.copy()
                pose[:3, 3] = start[:3, 3] + (target[:3, 3] - start[:3, 3]) * j / 20
                session.target(now, pose)
                for _ in range(5):
                    now = counted_tick(session, solver, now)
                if j % 4 == 0:
                    worker.run()   # the worker answers now and then, a question or two late
        else:
            session.target(now, target)
        for _ in range(800):
            now = counted_tick(session, solver, now)
            if int(now / PERIOD) % 7 == 0:
                worker.run()
        assert solver.in_tick == 0 and solver.full > 0
        q, v, _ = session.plan.sample(now)
        tip = chain.forward(q)
        assert np.linalg.norm(tip[:3, 3] - target[:3, 3]) < 1e-6, k
        assert not np.any(v) and session.plan.at_rest()
        # At rest means still: ticks go on and nothing moves.
        for _ in range(50):
            session.tick(now)
            now += PERIOD
        assert np.array_equal(session.plan.sample(now)[0], q)
