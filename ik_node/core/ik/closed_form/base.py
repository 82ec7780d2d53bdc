# SPDX-License-Identifier: Apache-2.0

"""What the closed-form solvers share: arm geometry, branches, tolerances, the solver base.

From the chain at zero joints: the joint axes and points (zero_geometry),
where axes meet (meeting_point), the elbow plane (check_planar_elbow) and the
SRS model of an arm (model_of, SRSModel); the 8 (elbow, shoulder, wrist)
branches and their orders; the success tolerances; and ClosedFormSolver, the
base class of AnalyticSRS and AnalyticOffsetWrist (the kernels of the
backend, numpy or numba, and their argument containers).
"""

from dataclasses import dataclass
import math
from typing import Any, Callable, List, Sequence, Tuple

from ik_node.core.errors import ModelError
from ik_node.core.ik.base import check_pose, IKSolver
from ik_node.core.kernels.backend import Backend
from ik_node.core.kernels.base import ORTHONORMAL_TOL
from ik_node.core.model.chain import Chain
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Two axes "meet" when their closest points are nearer than this (URDF
# numbers are given to 1e-4 m or better; 1e-6 m accepts rounding only).
MEET_TOL_M = 1e-6


# Below this sine of their angle, two axes count as parallel.
PARALLEL_SIN = 1e-9


# A wrist centre this far beyond the reach (or inside the fold) is still
# accepted as reachable: a target built from an exactly stretched arm
# computes as out of reach by rounding (~1e-16 m).
REACH_TOL_M = 1e-9


# Success of an analytic solve: residuals below these (the closed form is
# exact to ~1e-12; this only flags genuine misses such as a clamped reach).
POSITION_TOL_M = 1e-9


ORIENTATION_TOL_RAD = 1e-9


# The 8 branches: (elbow, shoulder, wrist) signs.
BRANCHES = np.array([(e, s, w) for e in (1, -1) for s in (1, -1) for w in (1, -1)],
                    dtype=np.float64)


# Branch orders with each branch first (the rest in BRANCHES order), built once.
BRANCH_ORDERS = {tuple(int(v) for v in first): np.ascontiguousarray(np.concatenate(
    (first[None], BRANCHES[np.any(BRANCHES != first, axis=1)]))) for first in BRANCHES}


def line_gap(p1, w1, p2, w2) -> Tuple[float, FloatArray]:
    """Distance between two lines and the point on line 2 closest to line 1."""
    n = np.cross(w1, w2)
    sn = float(np.linalg.norm(n))
    if sn < PARALLEL_SIN:
        raise ModelError('parallel')
    gap = abs(float(np.dot(p2 - p1, n))) / sn
    # Closest point on line 2: p2 + t w2, with (p2 + t w2 - p1) . (w1 x n) = 0.
    t = float(np.dot(p1 - p2, np.cross(w1, n))) / float(np.dot(w2, np.cross(w1, n)))
    return gap, p2 + t * w2


def point_line_distance(x, p, w) -> float:
    """Distance (m) of the point x (3,) from the line through p (3,) along the unit w (3,)."""
    d = x - p
    return float(np.linalg.norm(d - np.dot(d, w) * w))


@dataclass(frozen=True)
class SRSModel:
    """Geometry of an SRS arm at its zero configuration, base frame, metres."""

    axes: FloatArray         # (7, 3) unit world axes w_i
    shoulder: FloatArray     # (3,) S
    elbow0: FloatArray       # (3,) E0, on axis 4
    wrist0: FloatArray       # (3,) W0
    upper_arm: float         # L1
    forearm: float           # L2
    wrist_in_tip: FloatArray  # (3,) W in the tip frame
    tip_rotation0: FloatArray  # (3, 3) R_M
    lower: FloatArray        # (7,)
    upper: FloatArray        # (7,)
    reach_low: float         # shoulder-wrist distances the elbow's limits allow, m
    reach_high: float


def compiled_entry(dispatcher):
    """Return the machine-code entry of a numba function compiled for one signature, or None.

    Calling it skips numba's type dispatch (resolving a named tuple of arrays
    costs ~2 us, more than a polish iteration); only for arguments of that
    signature (the caller checks dtype and layout; the rest are its own).
    """
    try:
        signatures = dispatcher.signatures
        if len(signatures) != 1:
            return None
        return dispatcher.overloads[signatures[0]].entry_point
    except (AttributeError, KeyError):   # another numba's internals: dispatch as usual
        return None


def distinct(qs: FloatArray) -> List[FloatArray]:
    """Rows of qs (K, n) with the repeats (within 1e-9 rad) left out, in order."""
    unique: List[FloatArray] = []
    for q in qs:
        if not any(np.allclose(q, other, atol=1e-9) for other in unique):
            unique.append(q)
    return unique


def zero_geometry(chain: Chain, kind: str = 'an SRS arm'
                  ) -> Tuple[FloatArray, FloatArray, FloatArray]:
    """World axes (7, 3), points on them (7, 3) and the tip pose (4, 4) at q = 0.

    ``kind`` names the class of arm in the error messages.

    Raises:
        ModelError: not 7 revolute joints (no prismatic or mimic joints).

    """
    if chain.n != 7:
        raise ModelError(f'not {kind}: {chain.n} free joints, {kind} has 7')
    if chain._has_prismatic or not chain._identity_map or chain._axis.shape[0] != 7:
        raise ModelError(f'not {kind}: needs 7 revolute joints, no prismatic or mimic joints')
    rows, tip_r, tip_p = chain.frames([0.0] * 7)
    frames = np.array(rows)
    axes = np.einsum('jab,jb->ja', frames[:, :9].reshape(7, 3, 3), chain._axis)
    tip = np.eye(4)
    tip[:3, :3], tip[:3, 3] = np.reshape(tip_r, (3, 3)), tip_p
    return axes, frames[:, 9:], tip


def meeting_point(axes: FloatArray, points: FloatArray, joints: Sequence[int], label: str,
                  kind: str) -> FloatArray:
    """Point (3,) where the axes of ``joints`` (2 or 3 indices) meet; ModelError if they miss.

    ``label`` names the group (shoulder, wrist), ``kind`` the class of arm, in the message.
    """
    i, j = joints[0], joints[1]
    names = f'{joints[0] + 1}-{joints[-1] + 1}'
    try:
        gap, point = line_gap(points[i], axes[i], points[j], axes[j])
    except ModelError:
        raise ModelError(f'not {kind}: axes of joints {i + 1} and {j + 1} are parallel, so the '
                         f'{label} joints do not meet in one point') from None
    for k in joints[2:]:
        gap = max(gap, point_line_distance(point, points[k], axes[k]))
    if gap > MEET_TOL_M:
        raise ModelError(f'not {kind}: axes of joints {names} ({label}) miss each other by '
                         f'{gap:.3g} m (tolerance {MEET_TOL_M:g} m)')
    return point


def check_planar_elbow(axes: FloatArray, points: FloatArray, shoulder: FloatArray,
                       wrist: FloatArray, kind: str) -> None:
    """Raise ModelError unless shoulder and wrist (3,) project onto axis 4 at one point."""
    w4, p4 = axes[3], points[3]
    s_along = float(np.dot(shoulder - p4, w4))
    w_along = float(np.dot(wrist - p4, w4))
    if abs(s_along - w_along) > MEET_TOL_M:
        raise ModelError(f'not {kind}: the shoulder and wrist points project onto the elbow '
                         f'axis (joint 4) {abs(s_along - w_along):.3g} m apart, so the elbow does '
                         'not bend in one plane')


def model_of(chain: Chain, axes: FloatArray, points: FloatArray, tip: FloatArray,
             shoulder: FloatArray, wrist: FloatArray, kind: str = 'an SRS arm') -> SRSModel:
    """Build the SRSModel of shoulder, wrist points (3,), elbow on axis 4 (ModelError if bad)."""
    w4, p4 = axes[3], points[3]
    elbow = p4 + float(np.dot(shoulder - p4, w4)) * w4
    upper_arm = float(np.linalg.norm(elbow - shoulder))
    forearm = float(np.linalg.norm(wrist - elbow))
    if upper_arm < MEET_TOL_M or forearm < MEET_TOL_M:
        raise ModelError(f'not {kind}: the elbow axis passes through the shoulder or wrist '
                         'point (zero-length upper arm or forearm)')
    if np.linalg.norm(np.cross(axes[0], axes[1])) < PARALLEL_SIN or \
            np.linalg.norm(np.cross(axes[4], axes[5])) < PARALLEL_SIN:
        raise ModelError(f'not {kind}: consecutive shoulder or wrist axes are parallel')
    reach_low, reach_high = reach_range(elbow - shoulder, wrist - elbow, w4,
                                        chain.lower[3], chain.upper[3])
    return SRSModel(axes=axes, shoulder=shoulder, elbow0=elbow, wrist0=wrist,
                    upper_arm=upper_arm, forearm=forearm,
                    wrist_in_tip=tip[:3, :3].T @ (wrist - tip[:3, 3]),
                    tip_rotation0=tip[:3, :3].copy(), lower=chain.lower.copy(),
                    upper=chain.upper.copy(), reach_low=reach_low, reach_high=reach_high)


def reach_range(a, b, w4, lower4, upper4) -> Tuple[float, float]:
    """Smallest and largest |W - S| over the elbow angles within joint 4's limits.

    With a = E0 - S and b = W0 - E0 (zero configuration),
    |W - S|^2 = |a|^2 + |b|^2 + 2 rho cos(q4 - phase) (law of cosines, see
    AnalyticSRS._elbow): the extremes are at q4 = phase (+ k pi) when inside
    the limits, else at a limit.
    """
    a1, a2 = float(a @ b), float(a @ np.cross(w4, b))
    rho, phase = math.hypot(a1, a2), math.atan2(a2, a1)
    base = float(a @ a + b @ b)
    lo4 = max(lower4, phase - 2.0 * math.pi)
    hi4 = min(upper4, phase + 2.0 * math.pi)
    candidates = [lo4, hi4] + [phase + k * math.pi for k in (-2, -1, 0, 1, 2)
                               if lo4 <= phase + k * math.pi <= hi4]
    values = [math.sqrt(max(base + 2.0 * rho * math.cos(c - phase), 0.0)) for c in candidates]
    return min(values), max(values)


class ClosedFormSolver(IKSolver):
    """What the closed-form solvers share: calling one-source kernels on either backend.

    Subclasses call ``_use_backend(resolve(backend))``: ``backend`` (the
    name), ``_be`` (the Backend), ``_k`` (its base kernels), and the
    per-call helpers ``_arg`` (an array argument as the kernels take it:
    compiled, itself; CPython, a list) and ``_rows`` (scratch rows for a
    kernel) bound once, so that a solve pays one call for each (they run
    several times per solve; a method calling the Backend's cost ~0.6 us a
    solve of ~12 us, measured).
    """

    backend: str
    _be: Backend
    _k: Any
    _compiled: bool
    _arg: Callable[[FloatArray], Any]
    _rows: Callable[[int, int], Any]

    def _use_backend(self, be: Backend) -> Backend:
        """Take the Backend ``be`` (see the class docstring); return it."""
        self._be, self.backend, self._k, self._compiled = be, be.name, be.base, be.compiled
        self._arg, self._rows = be.arg, be.rows
        return be

    def _check_pose(self, pose) -> FloatArray:
        """check_pose, with a compiled fast path for the valid case (~0.3 vs ~6 us)."""
        if self._compiled and isinstance(pose, np.ndarray) and pose.shape == (4, 4) \
                and pose.dtype == np.float64 and self._k.is_rigid_transform(pose, ORTHONORMAL_TOL):
            return pose
        return check_pose(pose)  # raises with the reason
