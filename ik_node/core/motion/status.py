# SPDX-License-Identifier: Apache-2.0

"""What a motion tracker gives out: joint commands, and a status for diagnostics."""

from dataclasses import dataclass
from typing import Optional, Tuple

from ik_node.core.ik.base import IKResult
from ik_node.core.motion.arrival import Arrival
from ik_node.core.motion.mode import Mode
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Command:
    """One joint command: positions (n,) and velocities (n,) at ``time`` (s, caller's clock)."""

    q: FloatArray
    v: FloatArray
    time: float


@dataclass(frozen=True)
class TrackerStatus:
    """A snapshot of the tracker, for diagnostics (:meth:`MotionTracker.status`).

    Attributes:
        mode: a :class:`Mode` (equal to its text: 'trajectory', 'direct', 'reset', 'twist').
        solver: the IK solver's name; backend: its backend ('numpy', 'numba').
        task: what of a target counts (ik.task.Task.name: 'pose', 'position', ...).
        ik_budget_s: the solver's budget per solve, s (None: a closed form).
        last_result: the last solve's result (None before any).
        target_result: the newest target's reachability check (None before one).
        last_solve_s: the last solve's wall-clock time, s.
        solve_time_percentiles: (p50, p99, max) of the recent solve times, s
            (None before any solve).
        twist_timeouts: twists that expired (dead-man stops).
        twists_scaled: twists scaled down to the tip speed limits.
        targets_clamped: targets pulled onto the workspace sphere.
        keys_retimed, keys_dropped, keys_duplicate: the trajectory's verdicts
            on target keys (see CartesianTrajectory.add_key).
        local_solves: moving goals followed by local damped steps.
        arrival: the arm against its target: verdict, reason, distance, progress
            (ik_node.core.motion.arrival).

    """

    mode: Mode
    solver: str
    backend: str
    task: str
    ik_budget_s: Optional[float]
    last_result: Optional[IKResult]
    target_result: Optional[IKResult]
    last_solve_s: float
    solve_time_percentiles: Optional[Tuple[float, float, float]]
    twist_timeouts: int
    twists_scaled: int
    targets_clamped: int
    keys_retimed: int
    keys_dropped: int
    keys_duplicate: int
    local_solves: int
    arrival: Arrival

    @classmethod
    def of(cls, tracker) -> 'TrackerStatus':
        """Return the snapshot of a MotionTracker now (its status(); it imports this module)."""
        stats, trajectory, goals = tracker.goals.stats, tracker.trajectory, tracker.goals
        return cls(
            mode=tracker.mode, solver=goals.solver.name, backend=goals.solver.backend,
            task=goals.solver.task.name,
            ik_budget_s=goals.solver.budget_s, last_result=stats.last_result,
            target_result=goals.target_result, last_solve_s=stats.last_solve_s,
            solve_time_percentiles=stats.percentiles(), twist_timeouts=tracker.twists.timeouts,
            twists_scaled=tracker.twists.scaled, targets_clamped=tracker.workspace.clamped,
            keys_retimed=trajectory.retimed, keys_dropped=trajectory.dropped,
            keys_duplicate=trajectory.duplicates, local_solves=goals.local_solves,
            arrival=tracker.arrival())
