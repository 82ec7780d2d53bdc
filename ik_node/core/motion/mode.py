# SPDX-License-Identifier: Apache-2.0

"""The tracker's modes: where the joints are headed, and from what input.

A ``str`` enum: each member equals its value ('trajectory' == Mode.TRAJECTORY),
so diagnostics and tests that read the text keep reading it.
"""

from enum import Enum


class Mode(str, Enum):
    """What drives the goal (:class:`ik_node.core.motion.tracker.MotionTracker`).

    TRAJECTORY: pose targets through the exp-map cubic trajectory (smoothing on).
    DIRECT: pose targets straight to the solver (smoothing off).
    RESET: back to the reset posture in joint space.
    TWIST: tip velocity commands (teleoperation), integrated per tick.
    """

    TRAJECTORY = 'trajectory'
    DIRECT = 'direct'
    RESET = 'reset'
    TWIST = 'twist'

    def __str__(self) -> str:
        """Return the value ('twist'), as diagnostics print it."""
        return self.value

    @staticmethod
    def for_poses(smoothing: bool) -> 'Mode':
        """Return the mode that serves pose targets: TRAJECTORY with smoothing, else DIRECT."""
        return Mode.TRAJECTORY if smoothing else Mode.DIRECT
