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

"""The result record every IK solver returns, and target validation they share."""

from dataclasses import dataclass
import math

from ik_node.core.errors import InvalidInputError
from ik_node.core.rotations import _single_rotation_matrix, check_rotation_matrix
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
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

    """

    q: FloatArray
    success: bool
    position_error: float
    orientation_error: float
    iterations: int = 0
    restarts: int = 0
    elapsed_s: float = 0.0
    reason: str = ''


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
    if not all(math.isfinite(v) for row in rows for v in row):
        raise InvalidInputError(f'{name}: expected finite numbers, received NaN or inf')
    if rows[3] != [0.0, 0.0, 0.0, 1.0]:
        raise InvalidInputError(f'{name}: last row must be [0, 0, 0, 1], received {rows[3]}')
    if _single_rotation_matrix(np.ascontiguousarray(arr[:3, :3])) is None:
        check_rotation_matrix(arr[:3, :3], name + ' rotation')  # raises with the reason
    return arr
