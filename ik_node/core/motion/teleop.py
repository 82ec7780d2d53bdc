# SPDX-License-Identifier: Apache-2.0

"""Teleoperation: a twist integrated into a moving target pose, and the bound on its lead.

A twist is held constant between two commands (the latest one the caller
received); :func:`integrate_twist` moves a pose by it over a real time step,
exactly (no first-order error, so the result does not depend on how the
time is split into ticks). :func:`bound_lead` keeps the moving target within
a given distance and angle of the arm's own pose, so it cannot run away
when the arm cannot follow. :class:`TwistInput` holds the twist a tracker
takes (dead-man timeout, tip speed limits, lead). Poses are 4x4 homogeneous matrices of the tip in
the chain's base frame; metres, radians, seconds.
"""

import math
from typing import Callable, Optional, Tuple

from ik_node.core.kernels.base import quat_exp, quat_multiply, quat_to_matrix, rotation_vector
from ik_node.core.poses import pose_matrix
from ik_node.core.rotations import matrix_to_quaternion
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Below this screw angle (rad) the coefficients of the SE(3) exponential are
# taken from their series to t^4 (truncation below 3e-17; the closed forms
# lose digits to cancellation there: ~1e-12 relative at 1e-2, worse below).
SERIES_BELOW = 1e-2
# The integrated twist target may lead the arm (the commanded pose) by at
# most what the commanded twist covers in this long, and at least the
# minimums below: enough lead for the arm to reach the commanded speed (it
# needs the braking distance ahead of it), never a runaway when it cannot
# follow (a limit, out of reach).
TWIST_LEAD_S = 0.5
TWIST_LEAD_MIN_M = 0.005
TWIST_LEAD_MIN_RAD = 0.02


def integrate_twist(pose: FloatArray, linear: FloatArray, angular: FloatArray, dt: float,
                    body: bool) -> FloatArray:
    """Return the pose (4x4) reached from ``pose`` (4x4) by a constant twist held for dt.

    Args:
        pose: (4, 4) tip pose in the base frame.
        linear: (3,) velocity of the tip origin, m/s.
        angular: (3,) angular velocity of the tip, rad/s.
        dt: seconds.
        body: False: both vectors in the base frame (the tip turns about its
            own origin, which moves in a straight line); True: both in the
            tip frame, which turns with the tip (the origin moves on a helix).

    The orientation takes the exact exponential-map update of seed 003,
    ``q(t + dt) = exp(w dt / 2) q(t)`` for a base-frame w (on the left),
    ``q(t) exp(w dt / 2)`` for a tip-frame w (on the right). The position:
    base frame ``p + v dt``; tip frame the integral of ``R(s) v`` with
    ``R(s) = R exp([w] s)``, i.e. ``p + R V(w dt) v dt`` with the SE(3)
    exponential's ``V(phi) = I + (1 - cos t) / t^2 [phi] + (t - sin t) / t^3
    [phi]^2``, ``t = |phi|``.
    """
    p, r = pose[:3, 3], pose[:3, :3]
    x, y, z, w = matrix_to_quaternion(r).tolist()
    phi = dt * np.asarray(angular, dtype=np.float64)
    tx, ty, tz, tw = quat_exp(*(0.5 * phi).tolist())
    move = dt * np.asarray(linear, dtype=np.float64)
    if body:
        quat = quat_multiply(x, y, z, w, tx, ty, tz, tw)
        p_new = p + r @ screw_translation(phi, move)
    else:
        quat = quat_multiply(tx, ty, tz, tw, x, y, z, w)
        p_new = p + move
    return pose_matrix(quat_to_matrix(*quat), p_new)


def screw_translation(phi: FloatArray, move: FloatArray) -> FloatArray:
    """V(phi) @ move: displacement (3,) of a frame turning by phi (3,) while moving ``move``."""
    t2 = float(phi @ phi)
    t = math.sqrt(t2)
    if t < SERIES_BELOW:
        a = 0.5 - t2 / 24.0 + t2 * t2 / 720.0
        b = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0
    else:
        a, b = (1.0 - math.cos(t)) / t2, (t - math.sin(t)) / (t2 * t)
    cross = np.cross(phi, move)
    return move + a * cross + b * np.cross(phi, cross)


def bound_lead(target: FloatArray, arm: FloatArray, lead_m: float, lead_rad: float) -> None:
    """Pull ``target`` (4x4, in place) to within lead_m and lead_rad of ``arm`` (4x4).

    The position moves along the line to the arm's; the orientation along
    the shortest turn from the arm's (its rotation vector scaled down), so a
    target within both leads is left exactly as it was.
    """
    gap = target[:3, 3] - arm[:3, 3]
    distance = float(np.linalg.norm(gap))
    if distance > lead_m:
        target[:3, 3] = arm[:3, 3] + gap * (lead_m / distance)
    # The turn from the arm to the target, in the arm's frame, as a rotation vector.
    turn = np.array(rotation_vector(tuple((arm[:3, :3].T @ target[:3, :3]).ravel())))
    angle = float(np.linalg.norm(turn))
    if angle > lead_rad:
        half = (0.5 * lead_rad / angle) * turn
        step = quat_to_matrix(*quat_exp(*half.tolist()))
        target[:3, :3] = arm[:3, :3] @ np.array(step).reshape(3, 3)


class TwistInput:
    """The twist being held: (linear (3,) m/s, angular (3,) rad/s, body frame?) or none.

    Each twist holds from its time until the next one or until the dead-man
    timeout; the target is integrated over exactly that time (seconds, the
    caller's clock).

    Attributes:
        twist: the held twist, None when released.
        timeouts: twists that expired (dead-man stops).
        scaled: twists scaled down to the tip speed limits.

    """

    def __init__(self):
        """Nothing held."""
        self.twist: Optional[Tuple[FloatArray, FloatArray, bool]] = None
        self.time = -math.inf   # when the held twist was given
        self.moved_to = -math.inf   # the target is integrated up to this time
        self.timeouts = 0
        self.scaled = 0

    def within_tip_limits(self, linear: FloatArray, angular: FloatArray, max_linear: float,
                          max_angular: float) -> Tuple[FloatArray, FloatArray]:
        """Scale a twist (both parts by one factor) to max_linear (m/s) and max_angular (rad/s)."""
        speed, turn = float(np.linalg.norm(linear)), float(np.linalg.norm(angular))
        scale = min(1.0, max_linear / speed if speed > 0.0 else 1.0,
                    max_angular / turn if turn > 0.0 else 1.0)
        if scale < 1.0:
            self.scaled += 1
            return linear * scale, angular * scale
        return linear, angular

    def hold(self, time: float, linear: FloatArray, angular: FloatArray, body: bool) -> bool:
        """Hold a new twist from ``time`` (the target integrated up to then); False: a release.

        A zero twist releases (returns False, nothing held).
        """
        self.time = max(time, self.moved_to)
        self.moved_to = self.time
        if not (np.any(linear) or np.any(angular)):
            self.twist = None
            return False
        self.twist = (linear, angular, bool(body))
        return True

    def restart_clock(self, time: float) -> None:
        """Integrate from ``time`` on (teleoperation starts, or the clock went back)."""
        self.moved_to = self.time = time

    def advance(self, target: FloatArray, time: float, timeout: float,
                within: Callable[[FloatArray], FloatArray]) -> Tuple[FloatArray, bool]:
        """Integrate the held twist into target (4, 4) up to ``time`` or its expiry.

        ``within`` bounds each new target (the workspace). Returns (the
        target, True when the twist expired at ``time``: counted, the caller
        releases).
        """
        if self.twist is None:
            return target, False
        expiry = self.time + timeout
        end = min(time, expiry)
        if end > self.moved_to:
            lin, ang, body = self.twist
            target = within(integrate_twist(target, lin, ang, end - self.moved_to, body))
            self.moved_to = end
        if time > expiry:
            self.timeouts += 1
            return target, True
        return target, False

    def bound(self, target: FloatArray, arm: FloatArray) -> None:
        """Pull the target (4, 4, in place) back within the held twist's lead of ``arm``."""
        assert self.twist is not None  # only while teleoperating
        lin, ang, _ = self.twist
        bound_lead(target, arm,
                   max(TWIST_LEAD_S * float(np.linalg.norm(lin)), TWIST_LEAD_MIN_M),
                   max(TWIST_LEAD_S * float(np.linalg.norm(ang)), TWIST_LEAD_MIN_RAD))
