# SPDX-License-Identifier: Apache-2.0
"""ThreadWarmUp: a solver's kernels load in a thread beside the ticks, never in a tick.

The group node swaps its numpy solver for a numba one when the kernels are
compiled; warmed up inside a tick that swap stalled the commands 0.3-0.5 s.
These tests check the thread's contract with a solver whose warm_up the
test holds: it runs in another thread, the caller sees it unfinished
meanwhile, the GIL's switch interval is lowered only while it runs, and a
failure is kept, not raised into the tick.
"""

import sys
import threading

from ik_node.core.warm import ThreadWarmUp
import pytest

WAIT_S = 30.0


class HeldSolver:
    """A solver whose warm_up blocks until the test lets it go (and may then fail)."""

    def __init__(self, fail=False):
        """Not started; warm_up will raise RuntimeError when ``fail``."""
        self.release = threading.Event()
        self.started = threading.Event()
        self.thread = None
        self.args = None
        self.fail = fail

    def warm_up(self, *args):
        """Record the thread and the arguments, wait for the release."""
        self.thread, self.args = threading.current_thread(), args
        self.started.set()
        assert self.release.wait(WAIT_S)
        if self.fail:
            raise RuntimeError('no kernels')


def finish(job):
    """Wait (bounded) until the job has finished; return it."""
    job._thread.join(WAIT_S)
    assert job.finished()
    return job


def test_warm_up_runs_in_another_thread_and_the_switch_interval_comes_back():
    before = sys.getswitchinterval()
    solver = HeldSolver()
    job = ThreadWarmUp(solver, 1.5, switch_interval_s=0.0005)
    try:
        assert solver.started.wait(WAIT_S)
        assert solver.thread is not threading.current_thread()
        assert solver.args == (1.5,)
        assert not job.finished()
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    finally:
        solver.release.set()
    finish(job)
    assert job.error is None and job.solver is solver
    assert sys.getswitchinterval() == pytest.approx(before)
    assert job.finished()   # asked again: still finished, the interval untouched
    assert sys.getswitchinterval() == pytest.approx(before)


def test_a_failed_warm_up_is_kept_not_raised():
    before = sys.getswitchinterval()
    solver = HeldSolver(fail=True)
    job = ThreadWarmUp(solver)
    solver.release.set()
    finish(job)
    assert isinstance(job.error, RuntimeError) and 'no kernels' in str(job.error)
    assert sys.getswitchinterval() == pytest.approx(before)
