# SPDX-License-Identifier: Apache-2.0
"""Where a tick's time goes: wall-clock seconds per part of the motion step.

:class:`TickCosts` is filled by the tracker and the command stream while
:meth:`ik_node.core.motion.session.MotionSession.tick` runs, and read after
it (``ik_bench ticks`` prints which part took the time of the slowest
ticks). Parts: ``goal`` (local steps, bounded solves, taking the worker's
answers), ``limits`` (the limiting step), ``collision`` (the guard's
judgement of each step and its slide), ``jerk`` (the jerk stage and the
committed points); the rest of the tick (feedback, the clock, bookkeeping)
is its total less their sum. About 0.1 us per part and grid point.
"""

import time
from typing import Dict

PARTS = ('goal', 'limits', 'collision', 'jerk')


class TickCosts:
    """Wall-clock time per part of the current (or last) tick, s (module docstring).

    Attributes:
        parts: part name -> seconds in this tick.
        total: the whole tick's wall-clock time, s (set by :meth:`end`).

    """

    def __init__(self):
        """No tick timed yet."""
        self.parts: Dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self.total = 0.0
        self._started = 0.0

    def start(self) -> None:
        """Begin a tick: every part at zero."""
        for part in PARTS:
            self.parts[part] = 0.0
        self._started = time.perf_counter()

    def add(self, part: str, seconds: float) -> None:
        """Count ``seconds`` to ``part`` (one of PARTS)."""
        self.parts[part] += seconds

    def end(self) -> float:
        """End the tick; return its total wall-clock time, s."""
        self.total = time.perf_counter() - self._started
        return self.total

    @property
    def other(self) -> float:
        """The tick's time outside the parts, s (feedback, clock, bookkeeping)."""
        return max(0.0, self.total - sum(self.parts.values()))
