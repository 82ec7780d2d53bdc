# SPDX-License-Identifier: Apache-2.0

"""What every IK solver shares: its interface, its result record, the pose error.

``solver.solve(T_target, q_reference) -> IKResult``: the tip pose (4, 4) in
the chain's base frame, a joint vector (n,) to stay near (the seed of a
numerical solver, the branch and swivel of the analytic one), and an
optional elbow ``pole`` (base frame, m) that solvers with an elbow model use
(``uses_pole``) and others ignore. The motion tracker and the node call only
this, so they never look at which solver runs.
"""

import abc
from dataclasses import dataclass
import math
from typing import Any, ClassVar, Optional

from ik_node.core.errors import InvalidInputError
from ik_node.core.ik.task import POSE, Task
from ik_node.core.kernels import base as kernels
from ik_node.core.kernels.base import ORTHONORMAL_TOL
from ik_node.core.model.chain import fields_equal
from ik_node.core.rotations import check_rotation_matrix
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class IKResult:
    """Outcome of one IK solve.

    Attributes:
        q: (n,) joint values in ``Chain.joint_names`` order; always finite and
            within the joint limits, also when ``success`` is False (then the
            best configuration found).
        success: True when both residuals are within the solver's tolerances.
        position_error: distance from the reached tip position to the target,
            metres (0 when position is not part of the goal).
        orientation_error: angle of the rotation from the reached tip
            orientation to the target, radians in [0, pi] (0 when orientation
            is not part of the goal).
        iterations: solver iterations over all attempts.
        restarts: random restarts used (0 when the first attempt succeeded).
        elapsed_s: wall-clock time of the solve, seconds.
        reason: why the solve failed ('' on success).
        in_collision: on success, the checked pair ('A with B') inside the
            collision margin at q when no free solution was found ('' when
            free or not checked; ik_node.core.collision.free).

    """

    q: FloatArray
    success: bool
    position_error: float
    orientation_error: float
    iterations: int = 0
    restarts: int = 0
    elapsed_s: float = 0.0
    reason: str = ''
    in_collision: str = ''

    __eq__ = fields_equal
    __hash__ = None  # type: ignore[assignment]  # equal by value, arrays inside


class IKSolver(abc.ABC):
    """Inverse kinematics of one chain (see the module docstring).

    Attributes:
        chain: the chain solved for.
        backend: 'numba' or 'numpy', the implementation that runs.
        name: 'analytic' or 'jacobian'.
        uses_pole: True when ``pole`` turns the elbow (solvers with an elbow model).
        model_note: one line on how the solver sees the chain, for logs ('' if
            nothing to say): an exact or near-SRS arm, why not closed form.
        task: what of a target pose counts (ik.task.Task): the full pose for
            the closed forms; the Jacobian solver's is its own.

    """

    chain: Any  # the Chain solved for
    backend: str
    name: ClassVar[str]
    uses_pole: ClassVar[bool] = False
    model_note: str = ''
    task: Task = POSE

    @abc.abstractmethod
    def solve(self, T_target, q_reference=None, *, pole=None) -> IKResult:
        """Solve for joints that put the tip at T_target, near q_reference."""

    def solve_quick(self, T_target, q_reference, *, pole=None) -> Optional[IKResult]:
        """Solve at a cost bounded in advance (no search, restart or fallback), or None.

        What a tick may call (the full :meth:`solve` runs in the worker). The
        base class has none (None); a closed form solves at the pole's (or
        the reference's) swivel angle only, and fails rather than search.
        """
        return None

    @property
    def budget_s(self) -> Optional[float]:
        """Wall-clock budget of a solve, seconds (None: a closed form needs none)."""
        return None

    def set_budget(self, seconds: float) -> None:
        """Set the wall-clock budget of later solves (ignored by closed forms).

        Raises:
            InvalidInputError: not a finite number > 0.

        """
        check_budget(seconds)

    def aim_within_reach(self, pose: FloatArray) -> FloatArray:
        """Return the pose (4, 4) to move toward for ``pose``: itself, or one the arm can reach.

        Motion toward a pose out of reach heads for this one instead. The base
        class returns ``pose`` (the arm goes to the closest pose its solver
        finds); solvers with an elbow model pull it in so that the elbow stays
        bent (AnalyticSRS).
        """
        return pose

    def warm_up(self, q) -> None:
        """Run the solver's paths once at q (n,) (compiled kernels load at their first call).

        The base class solves for q's own pose from q; solvers with searches
        that only some targets reach exercise those too.
        """
        q = np.asarray(q, dtype=np.float64)
        self.solve(self.chain.forward(q), q)


def check_budget(seconds: float) -> float:
    """Return ``seconds`` as a float if it is a finite number > 0, else raise InvalidInputError."""
    value = float(seconds)
    if not (value > 0.0 and value < float('inf')):
        raise InvalidInputError(f'timeout: expected a finite number of seconds > 0, received '
                                f'{seconds!r}')
    return value


def check_pose(pose, name: str = 'T_target') -> FloatArray:
    """Validate a 4x4 homogeneous pose: finite, orthonormal rotation, last row 0 0 0 1.

    Raises:
        InvalidInputError: naming what is wrong.

    """
    arr = np.asarray(pose, dtype=np.float64)
    if arr.shape != (4, 4):
        raise InvalidInputError(f'{name}: expected a (4, 4) homogeneous transform, received '
                                f'shape {arr.shape}')
    rows = arr.tolist()  # plain floats: ~10x cheaper than numpy checks on a 4x4
    if kernels.is_rigid_transform(rows, ORTHONORMAL_TOL):
        return arr
    if not all(math.isfinite(v) for row in rows for v in row):
        raise InvalidInputError(f'{name}: expected finite numbers, received NaN or inf')
    if rows[3] != [0.0, 0.0, 0.0, 1.0]:
        raise InvalidInputError(f'{name}: last row must be [0, 0, 0, 1], received {rows[3]}')
    check_rotation_matrix(arr[:3, :3], name + ' rotation')  # raises with the reason
    return arr
