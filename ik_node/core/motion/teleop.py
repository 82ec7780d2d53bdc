# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""Teleoperation: a twist integrated into a moving target pose, and the bound on its lead.

A twist is held constant between two commands (the latest one the caller
received); :func:`integrate_twist` moves a pose by it over a real time step,
exactly (no first-order error, so the result does not depend on how the
time is split into ticks). :func:`bound_lead` keeps the moving target within
a given distance and angle of the arm's own pose, so it cannot run away
when the arm cannot follow. Poses are 4x4 homogeneous matrices of the tip in
the chain's base frame; metres, radians, seconds.
"""

import math

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
