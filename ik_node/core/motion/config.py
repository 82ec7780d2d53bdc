# SPDX-License-Identifier: Apache-2.0
"""The tracker's configuration: what the node's parameters set, checked once."""

from dataclasses import dataclass
import math
from typing import List, Optional, Tuple

from ik_node.core.errors import InvalidInputError

# Acceleration limits accepted (rad/s^2 or m/s^2), the scalar and each joint's.
ACCELERATION_RANGE = (1e-2, 1000.0)


@dataclass(frozen=True)
class TrackerConfig:
    """What the node's parameters set (units: m/s, rad/s, rad/s^2 or m/s^2, s).

    Attributes:
        smoothing: True: follow the cubic trajectory through the targets;
            False: go straight for the newest target.
        max_linear_speed, max_angular_speed: tip speed limits of the trajectory.
        max_joint_acceleration: acceleration limit of every joint.
        joint_acceleration_limits: per-joint limits in chain order, replacing
            max_joint_acceleration when not empty (URDFs carry none).
        ik_timeout: the numerical solver's budget per solve, seconds.
        twist_timeout: a twist older than this stops the arm (dead-man), s.
        posture: preferred joint vector (n,), chain order, within the limits;
            empty: none. A redundant arm drifts toward it in the null space
            of its pose (ik_node.core.motion.posture).
        posture_rate: the fastest that drift moves a joint, rad/s (m/s).

    """

    smoothing: bool = True
    max_linear_speed: float = 0.5
    max_angular_speed: float = 1.0
    max_joint_acceleration: float = 5.0
    joint_acceleration_limits: Tuple[float, ...] = ()
    ik_timeout: float = 0.005
    twist_timeout: float = 0.2
    posture: Tuple[float, ...] = ()
    posture_rate: float = 0.25

    def check(self, n: Optional[int] = None) -> 'TrackerConfig':
        """Return self when every value is valid (for n joints, when given).

        Raises:
            InvalidInputError: naming the first invalid value and the valid range.

        """
        for name in ('max_linear_speed', 'max_angular_speed', 'max_joint_acceleration',
                     'ik_timeout', 'twist_timeout', 'posture_rate'):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 < value < math.inf):
                raise InvalidInputError(f'{name}: expected a finite number > 0, received '
                                        f'{value!r}')
        low, high = ACCELERATION_RANGE
        limits = self.joint_acceleration_limits
        for name, values in (('max_joint_acceleration', [self.max_joint_acceleration]),
                             ('joint_acceleration_limits', list(limits))):
            if not all(isinstance(a, (int, float)) and low <= a <= high for a in values):
                raise InvalidInputError(f'{name}: expected values in [{low:g}, {high:g}] '
                                        f'rad/s^2, received {values}')
        if limits and n is not None and len(limits) != n:
            raise InvalidInputError(f'joint_acceleration_limits: expected {n} values (one per '
                                    f'joint, chain order) or none, received {len(limits)}')
        posture = self.posture
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in posture) or \
                (posture and n is not None and len(posture) != n):
            raise InvalidInputError(f'posture: expected {n or "n"} finite joint values (chain '
                                    f'order) or none, received {list(posture)}')
        return self

    def accelerations(self, n: int) -> List[float]:
        """Per-joint acceleration limits (n) in chain order."""
        if self.joint_acceleration_limits:
            return [float(a) for a in self.joint_acceleration_limits]
        return [float(self.max_joint_acceleration)] * n
