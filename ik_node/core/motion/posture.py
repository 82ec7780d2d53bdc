# SPDX-License-Identifier: Apache-2.0
"""Posture drift: a redundant arm's spare joints move toward a preferred posture.

Where a target leaves freedom (more joints than its task fixes: 6 of a
pose, 3 of a position, 5 of an axis), the target does not say where the
redundant joints go: after a singular pass or
an unreachable target the arm came back in another posture (the iiwa's
elbow swung by ~1 rad). :class:`PostureDrift` moves each solution toward
``TrackerConfig.posture`` in the null space of the task's rows, at a
bounded, smoothly ramped speed.
"""

import math
from typing import Optional, Sequence

from ik_node.core.ik.local import follow
from ik_node.core.ik.task import POSE
from ik_node.core.kernels.backend import Backend
from ik_node.core.model.chain import Chain
# The damped steps back onto the pose: as many as toward a moving pose.
from ik_node.core.motion.goals import LOCAL_ITERATIONS
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# A drift step this small in every joint (rad or m) is none (as a goal this
# close to the command is the command: MotionTracker's ARRIVED).
ARRIVED = 1e-12


class PostureDrift:
    """Drift toward a posture (see the module docstring).

    Args:
        chain: the arm's chain.
        posture: the preferred joint vector (n,), chain order; empty: none.

    """

    def __init__(self, chain: Chain, posture: Sequence[float] = ()):
        """At rest: no drift under way."""
        self.chain = chain
        self.posture = self._clipped(posture)
        self.speed = 0.0   # rad/s of the fastest joint of the drift
        #: What of the pose counts (ik.task.Task; the tracker sets its solver's).
        self.task = POSE
        # The local steps' Backend (None: numpy; the tracker sets it).
        self.follow_kernels: Optional[Backend] = None

    def set_posture(self, posture: Sequence[float]) -> None:
        """Take a new preferred posture (n,) (empty: none); the drift under way ramps on."""
        self.posture = self._clipped(posture)

    def _clipped(self, posture: Sequence[float]) -> Optional[FloatArray]:
        """Return the posture (n,) clipped into the limits; None without one."""
        if not posture:
            return None
        return np.clip(np.array(posture, dtype=np.float64), self.chain.lower, self.chain.upper)

    def toward(self, goal: FloatArray, pose: FloatArray, dt: float, rate: float,
               accelerations: FloatArray, pole: Optional[FloatArray]) -> FloatArray:
        """Move a solution (n,) of ``pose`` toward the posture for dt seconds, keeping the tip.

        The difference to the posture is projected onto the null space of the
        task's rows J (I - J+ J; the Jacobian for a pose), scaled to at most
        ``rate`` x dt per joint (rad/s, m/s), and the tip's second-order drift
        removed by damped steps back onto the pose
        (:func:`ik_node.core.ik.local.follow`). The drift's
        speed ramps up and down at half the smallest of ``accelerations``
        (n,). Not with a pole (it sets the elbow), nor when the step would
        leave the limits or not return to the pose: the goal is kept.
        """
        posture, task = self.posture, self.task
        if posture is None or self.chain.n <= task.rows or pole is not None or not dt > 0.0:
            self.speed = 0.0
            return goal
        tip, jac = self.chain.forward_and_jacobian(goal)
        jac = task.task_rows(jac, pose, tip)[0]
        d = posture - goal
        d -= np.linalg.pinv(jac, rcond=1e-10) @ (jac @ d)
        largest = float(np.max(np.abs(d)))
        # The drift's speed (of its fastest joint) ramps up and down at half the
        # smallest acceleration limit: a goal moving that smoothly is followed
        # exactly (feed-forward), so the commands stay on the pose too.
        accel = 0.5 * float(np.min(accelerations))
        speed = min(rate, self.speed + accel * dt, math.sqrt(2.0 * accel * largest))
        if largest <= ARRIVED or speed * dt <= ARRIVED:
            self.speed = 0.0
            return goal
        step = d * min(1.0, speed * dt / largest)
        moved, _, converged = follow(self.chain, goal + step, pose, LOCAL_ITERATIONS,
                                     self.follow_kernels, task)
        if not converged or not self.chain.within_limits(goal + step):
            self.speed = 0.0
            return goal
        self.speed = speed
        return moved
