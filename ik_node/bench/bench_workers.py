# SPDX-License-Identifier: Apache-2.0
"""Workers for benches on simulated time: answers handed over after their compute time.

:class:`LaggedWorker` answers in the caller's thread and hands the answer
to the tick when as much simulated time has passed as the answer took (a
worker thread's answer comes that late); :class:`NoPlanner` finds no path
(``--planner none``: what the planner adds).
"""

import time
from typing import Optional

from ik_node.core.motion.worker import ImmediateWorker


class NoPlanner:
    """A planner that finds nothing (``--planner none``)."""

    name = 'none'

    def plan(self, guard, start, goal, checkpoint, attempt=0):
        """Return no path."""
        return None, 'the planner is off (ik_bench arrival --planner none)'


class LaggedWorker(ImmediateWorker):
    """Answers as it is asked, and hands the answer over when its compute time has passed.

    The clock is the simulation's (``now()``, s): an answer that took 40 ms of
    wall-clock time is taken by the tick 40 ms of simulated time later, as
    a worker thread's would be.
    """

    def __init__(self, planner, now):
        """Answer with ``planner``; ``now()`` returns the simulated clock, s."""
        super().__init__(planner)
        self._now = now
        self._due: Optional[float] = None

    def ask(self, question) -> None:
        """Answer now; hand the answer over after its compute time."""
        started = time.perf_counter()
        super().ask(question)
        self._due = self._now() + (time.perf_counter() - started)

    def poll(self):
        """Return the answer once its time has come."""
        if self._due is None or self._now() < self._due:
            return None
        self._due = None
        return super().poll()
