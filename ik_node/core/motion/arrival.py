# SPDX-License-Identifier: Apache-2.0
"""Arrival: how far the arm is from its target, whether it is getting there, and why not.

What ``/diagnostics`` reports is the arm, not the solver: an
:class:`Arrival` is made from where the commands put the tip (the chain's
forward kinematics of the command) against the target, from the progress
made over the last STALL_S seconds (the tip nearer the target, or the
joints nearer the goal they head for), and, when there is none, from what
holds the arm: a checked pair the guard holds apart, a joint at its limit,
a target the worker found unreachable or only reachable in collision, a
planner that found no path. :class:`Verdict`:

* ``arrived``: the tip within ARRIVED_M and ARRIVED_RAD of the target, at rest;
* ``arriving``: progress, or too soon to say (with the distance and the time
  to go at the recent rate);
* ``held``: no progress for STALL_S, and the reason (the pair, the joint, a
  local minimum; a path is being planned);
* ``blocked``: the target is reachable only inside the collision margin:
  the arm holds the closest free pose found, so far off;
* ``unreachable``: no solution within the joint limits (the solver's reason);
* ``no path``: the planner found none in its time.

OK for the first two, WARN for the rest. :class:`Progress` keeps the
window of tip errors the tracker samples each SAMPLE_S; its :meth:`stalled`
is what makes the tracker bring the arm to rest and ask for a path.

Units: metres and radians; times in seconds on the tracker's clock.
"""

import collections
from dataclasses import dataclass
import enum
import math
from typing import Any, Deque, Optional, Tuple

import numpy as np

# The tip counts as at its target within these, m and rad (the node tests' tolerances).
ARRIVED_M, ARRIVED_RAD = 1e-4, 1e-3
# A radian of orientation error weighs as much as this many metres of position.
ROT_WEIGHT_M = 0.1
# Progress is judged over this window, s: less gained over it is a stall.
STALL_S = 0.3
# Progress over the window, any of: the weighted tip error fell by PROGRESS_M,
# m, or by PROGRESS_SHARE of itself (a slow last approach); the joints came
# PROGRESS_RAD (or that share) nearer the goal they head for, rad (a move
# between two solutions of the target, or along its self-motion, leaves the
# tip error as it is); the goal itself moved by PROGRESS_RAD (a trajectory
# under way) and the joints keep within FOLLOW_RAD of it (largest joint).
PROGRESS_M = 1e-3
PROGRESS_SHARE = 0.02
PROGRESS_RAD = 1e-3
FOLLOW_RAD = 0.05
# A gain this small (m, rad) is none (rounding: a share of an error of zero).
NO_GAIN = 1e-9
# The tip's error is sampled this often, s (a forward kinematics each).
SAMPLE_S = 0.02


class Verdict(str, enum.Enum):
    """What the arm is doing about its target (module docstring)."""

    ARRIVED = 'arrived'
    ARRIVING = 'arriving'
    HELD = 'held'
    BLOCKED = 'blocked'
    UNREACHABLE = 'unreachable'
    NO_PATH = 'no path'

    @property
    def ok(self) -> bool:
        """Return True for the verdicts reported as OK (arrived, arriving)."""
        return self in (Verdict.ARRIVED, Verdict.ARRIVING)


@dataclass(frozen=True)
class Arrival:
    """The arm against its target (module docstring).

    Attributes:
        verdict: the Verdict.
        reason: one line for people (the message of /diagnostics).
        distance_m: tip position to the target's, m.
        angle_rad: tip orientation to the target's, rad.
        approach_m_s: how fast the weighted error fell over the last window,
            m/s (negative: it grew).
        time_to_go_s: the weighted error over that rate, s (inf: no approach).

    """

    verdict: Verdict
    reason: str
    distance_m: float
    angle_rad: float
    approach_m_s: float = 0.0
    time_to_go_s: float = math.inf


def weighted(distance_m: float, angle_rad: float) -> float:
    """Return the tip error as one length: metres plus ROT_WEIGHT_M per radian."""
    return distance_m + ROT_WEIGHT_M * angle_rad


def arrived(distance_m: float, angle_rad: float) -> bool:
    """Return True when the tip is within ARRIVED_M and ARRIVED_RAD of its target."""
    return distance_m <= ARRIVED_M and angle_rad <= ARRIVED_RAD


class Progress:
    """The tip's errors to one target over the last STALL_S (module docstring)."""

    def __init__(self):
        """Nothing sampled yet."""
        # (time s, weighted error m, joints to goal rad, goal (n,))
        self._samples: Deque[Tuple[float, float, float, Any]] = collections.deque()
        self._key: Optional[tuple] = None
        self._source = None
        self._free_at = -math.inf   # the last sample with the joints moving freely, s
        self.last: Tuple[float, float] = (math.inf, math.inf)   # (m, rad) of the last sample
        self.since = -math.inf   # when the samples of this target began, s

    def due(self, time: float) -> bool:
        """Return True when the next sample is due at ``time`` (s)."""
        return not self._samples or time - self._samples[-1][0] >= SAMPLE_S

    def sample(self, key: tuple, time: float, distance_m: float, angle_rad: float,
               q, goal, source=None, free: bool = False) -> None:
        """Take the tip's error (m, rad) to the target ``key`` at ``time`` (s).

        ``q``, ``goal``: (n,) the joints and the goal they head for;
        ``source``: that goal's identity (another goal taken starts the
        window anew: its progress is measured from there); ``free``: the
        joints move and nothing holds their steps (a motion however slow:
        never a stall).
        """
        if key != self._key or source != self._source:
            self.restart(key, time)
            self._source = source
        if free:
            self._free_at = time
        to_goal = float(np.max(np.abs(goal - q))) if len(q) else 0.0
        self._samples.append((time, weighted(distance_m, angle_rad), to_goal, goal))
        self.last = (distance_m, angle_rad)
        # Keep the newest sample at least STALL_S old (samples come every
        # SAMPLE_S or a little more: a tick's grid).
        while len(self._samples) > 1 and time - self._samples[1][0] >= STALL_S:
            self._samples.popleft()

    def restart(self, key: Optional[tuple], time: float) -> None:
        """Forget the samples: a new target, or the arm moved on by another way (a path)."""
        self._samples.clear()
        self._key, self.since = key, time

    def approach(self) -> float:
        """Return how fast the weighted error fell over the window, m/s (0: too few samples)."""
        if len(self._samples) < 2:
            return 0.0
        (t0, e0, _, _), (t1, e1, _, _) = self._samples[0], self._samples[-1]
        return (e0 - e1) / (t1 - t0) if t1 > t0 else 0.0

    def stalled(self) -> bool:
        """Return True when a whole window passed held or still, with no progress.

        Held or still: at every sample the joints were at rest or their
        step was held (slid, braked); no progress: module docstring.
        """
        if len(self._samples) < 2:
            return False
        (t0, e0, g0, goal0), (t1, e1, g1, goal1) = self._samples[0], self._samples[-1]
        if t1 - t0 < STALL_S - 1e-9 or arrived(*self.last) or self._free_at >= t0:
            return False
        closer = e0 - e1 >= max(NO_GAIN, min(PROGRESS_M, PROGRESS_SHARE * e0)) or \
            g0 - g1 >= max(NO_GAIN, min(PROGRESS_RAD, PROGRESS_SHARE * g0))
        following = g1 <= FOLLOW_RAD and float(np.max(np.abs(goal1 - goal0))) >= PROGRESS_RAD
        return not (closer or following)
