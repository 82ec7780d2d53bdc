# SPDX-License-Identifier: Apache-2.0

"""The goal's own velocity, fed forward to the limiting step while its source stays the same.

A goal that moves smoothly (a sampled trajectory, an integrated twist, the
posture drift of a held goal) is followed with its velocity, so the arm
does not lag behind it by a braking distance; a goal taken anew is one to
stop at. Joint positions in rad (m for prismatic joints), times in seconds
of the caller's clock.
"""

from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class GoalVelocity:
    """The velocity (n,) of the goal from one command to the next, from the same source.

    Args:
        speeds: (n,) joint speed limits, rad/s (a faster goal is followed at them).

    """

    def __init__(self, speeds: FloatArray):
        """Nothing seen yet: the first goal is one to stop at."""
        self.speeds = np.asarray(speeds, dtype=np.float64)
        # (source, goal, time) of the previous command.
        self._last: Optional[Tuple[Optional[tuple], FloatArray, float]] = None

    def forget(self) -> None:
        """Treat the next goal as new (a resync, a restart, a brake, a solver change)."""
        self._last = None

    def of(self, goal: FloatArray, time: float, source: Optional[tuple]) -> FloatArray:
        """Return the goal's velocity (n,), rad/s, when it moves smoothly; else zeros.

        ``source`` names what moves the goal (None: a goal to stop at: a
        reset, a release). The velocity is the change since the previous
        command's goal from the same source, scaled down as a whole to the
        speed limits. Anything else (another source, nothing before) gives zeros.
        """
        last, self._last = self._last, (source, goal, time)
        if source is None or last is None or last[0] != source:
            return np.zeros(self.speeds.shape)
        w = (goal - last[1]) / (time - last[2])
        ratio = float(np.max(np.abs(w) / self.speeds))
        return w / ratio if ratio > 1.0 else w
