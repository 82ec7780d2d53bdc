# SPDX-License-Identifier: Apache-2.0

"""The elbows' way to their poles: a joint path that keeps the hands, played within the limits.

An elbow pole turns an arm's spare freedom (the swivel of a 7-joint arm
holding a 6-D pose) toward a point while the hands hold their targets. The
way there is a path of joint positions, each on every task (the waypoints
of :meth:`ik_node.core.ik.stacked.StackedIK.toward_poles`, a few
millimetres of elbow motion apart). Following each tick's pole step from the
lagging command instead chased a moving goal: near a wrist singularity a
joint had to reverse faster than its acceleration limit allowed, and the
hands left their targets by centimetres.

:class:`ElbowPath` plays the path as a time law on its length s (metres of
the faster elbow's motion): the speed ds/dt is at most

* the tip speed limit, each joint's speed limit over its motion per metre
  (``v_j / |q'_j|``), and a segment's length per tick (one waypoint passed
  per tick: one bend at a time);
* at a waypoint, where the direction bends, what each joint can take in a
  tick at a share of its acceleration (``a_j dt / |q'_j,next - q'_j|``);
* what it can still brake from before every later cap and before the last
  waypoint made so far (``sqrt(cap^2 + 2 A d)``, A the elbows' deceleration,
  at most ELBOW_ACCELERATION and each joint's share over its ``|q'_j|``);

and it ramps up at A. So the goal and its velocity (fed forward to the
limiting step) change only as fast as every joint can follow, and the
command stays on the path. Waypoints come a few per tick ahead of the
playback (the caller's :meth:`extend`); the path ends where no pole step
brings the elbows nearer (:meth:`finish`), and the playback stops there.

Joints (N,) rad or m; s in metres; times in seconds.
"""

import math
from typing import List, Tuple

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# The elbows' acceleration along their way, m/s^2.
ELBOW_ACCELERATION = 0.25
# The share of a joint's acceleration limit the path's speed changes and bends may take
# (the rest: the goal's corrections onto the tasks, and rounding).
ACCEL_SHARE = 0.5
# Closer than this to the last waypoint made (m of elbow motion) is there.
END_SNAP = 1e-12


class ElbowPath:
    """Waypoints in joint space and a speed along them (module docstring).

    Args:
        start: (N,) the first waypoint: the joints on every task now.
        speeds: (N,) joint speed limits.
        accelerations: (N,) joint acceleration limits.
        max_speed: the most the faster elbow moves, m/s (the tip speed limit).

    """

    def __init__(self, start: FloatArray, speeds: FloatArray, accelerations: FloatArray,
                 max_speed: float):
        """Start at rest at ``start``, no way ahead yet."""
        self.points: List[FloatArray] = [np.array(start, dtype=np.float64)]
        self.rates: List[FloatArray] = []     # per segment: joints (N,) per metre of elbow
        self.lengths: List[float] = []        # per segment: metres of elbow motion
        self.speeds = np.asarray(speeds, dtype=np.float64)
        self.accelerations = np.asarray(accelerations, dtype=np.float64)
        self.max_speed = float(max_speed)
        self.done = False     # no waypoint comes after the last one
        self.s = 0.0          # metres along the path
        self.speed = 0.0      # m/s along the path
        self._caps: List[float] = []       # per segment: its speed cap, m/s
        self._corners: List[float] = []    # per segment: the cap where it starts, m/s
        self._decel: List[float] = []      # per segment: the deceleration it allows, m/s^2

    @property
    def last(self) -> FloatArray:
        """The last waypoint made (N,)."""
        return self.points[-1]

    @property
    def length(self) -> float:
        """The path's length so far, m (as :meth:`_starts` sums it)."""
        return float(self._starts()[-1])

    def _starts(self) -> FloatArray:
        """Return (segments + 1,) where each segment starts along the path and its end, m."""
        return np.concatenate(([0.0], np.cumsum(self.lengths)))

    @property
    def finished(self) -> bool:
        """True when the whole path is played and the elbows rest at its end."""
        return self.done and self.speed == 0.0 and self.s >= self.length

    def extend(self, point: FloatArray, length: float, dt: float) -> None:
        """Add a waypoint (N,) ``length`` metres of elbow motion after the last one.

        ``dt`` (s) is the motion step the bend at the last waypoint is taken in.
        """
        point = np.array(point, dtype=np.float64)
        rate = (point - self.last) / length
        size = np.abs(rate)
        with np.errstate(divide='ignore'):
            # At most one waypoint passed per tick (one bend at a time).
            cap = min(self.max_speed, float(np.min(self.speeds / size)), length / dt)
            decel = min(ELBOW_ACCELERATION, float(np.min(ACCEL_SHARE * self.accelerations / size)))
            corner = math.inf if not self.rates else float(np.min(
                ACCEL_SHARE * self.accelerations * dt / np.abs(rate - self.rates[-1])))
        self.points.append(point)
        self.rates.append(rate)
        self.lengths.append(float(length))
        self._caps.append(cap)
        self._decel.append(decel)
        self._corners.append(corner)

    def finish(self) -> None:
        """Say that no waypoint comes after the last one (the elbows are nearest their poles)."""
        self.done = True

    def advance(self, dt: float) -> Tuple[FloatArray, FloatArray]:
        """Move ``dt`` seconds on; return (the joints there (N,), their velocity (N,))."""
        if not self.lengths:
            return self.last.copy(), np.zeros_like(self.last)
        starts = self._starts()
        k = self._segment(starts)
        decel = self._decel[k]
        arrive = self._arrival_speeds(k)   # the most at each later waypoint
        speed = min(self.speed + decel * dt, self._caps[k],
                    _braking(arrive[0], decel, float(starts[k + 1]) - self.s, dt))
        speed = max(speed, 0.0)
        total = float(starts[-1])
        self.s = self.s + speed * dt
        if self.s >= total - END_SNAP:   # at the last waypoint made: rest there
            self.s, speed = total, 0.0
        self.speed = speed
        k = self._segment(starts)
        point = self.points[k] + (self.s - starts[k]) * self.rates[k]
        return point, self.rates[k] * self.speed

    def _segment(self, starts: FloatArray) -> int:
        """Return the index of the segment s is in (the last one at its end)."""
        return min(int(np.searchsorted(starts, self.s, side='right')) - 1, len(self.lengths) - 1)

    def _arrival_speeds(self, k: int) -> List[float]:
        """Return the most speed at each waypoint after segment k's start, m/s, the end's 0.

        Backward from the last waypoint made (0: the path may end there):
        each waypoint's speed can be braked from within the segment after it
        (``sqrt(next^2 + 2 A L)``), and is at most its bend's cap and the
        speed caps of the segments on both sides.
        """
        out = [0.0]
        for i in range(len(self.lengths) - 1, k, -1):
            reach = math.sqrt(out[-1] ** 2 + 2.0 * self._decel[i] * self.lengths[i])
            out.append(min(reach, self._corners[i], self._caps[i], self._caps[i - 1]))
        out.reverse()
        return out


def _braking(end_speed: float, decel: float, distance: float, dt: float) -> float:
    """Return the most speed held for dt after which ``end_speed`` is reached within distance.

    Solves ``v dt + (v^2 - c^2) / (2 A) = d`` for v (c = end_speed, A =
    decel), as ``(c^2 + 2 A d) / (A dt + sqrt((A dt)^2 + c^2 + 2 A d))``
    (no cancellation near 0; kernels.limits.braking_speed for c = 0).
    """
    room = end_speed * end_speed + 2.0 * decel * max(distance, 0.0)
    ad = decel * dt
    if room <= 0.0:
        return 0.0
    return room / (ad + math.sqrt(ad * ad + room))
