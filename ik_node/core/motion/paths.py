# SPDX-License-Identifier: Apache-2.0

"""Target paths in plain numpy: the demo's figure-eight and its sequence.

ik_demo streams them over DDS; tests and the golden run replay them in plain
Python.
"""

from ik_node.core.rotations import axis_angle_to_quaternion, multiply
import numpy as np


def figure_eight(t, center, size, period):
    """Target pose (position (3,) m, quaternion (4,) x-y-z-w) of a lemniscate at time t, s.

    ``center`` (3,) m and ``size`` m in the base frame, ``period`` s: the tool
    points down and rocks about x by up to 0.35 rad.
    """
    a = 2.0 * np.pi * t / period
    p = center + size * np.array([0.0, np.sin(a), np.sin(a) * np.cos(a)])
    down = axis_angle_to_quaternion([0.0, 1.0, 0.0], np.pi)  # tool pointing down
    rock = axis_angle_to_quaternion([1.0, 0.0, 0.0], 0.35 * np.sin(a))
    return p, multiply(rock, down)


# The demo's sequence: the figure-eight's targets at this rate for this long,
# then a target this far (m, base frame: out of reach of every bundled arm).
EIGHT_RATE_HZ = 20.0
EIGHT_S = 16.0
FAR_POSITION = (2.0, 0.0, 0.5)


def play_demo(target, add_target, run, settle_s: float, back_s: float,
              settled=None) -> float:
    """Play the demo's sequence through ``add_target(t, pose)`` and ``run(t, seconds) -> t``.

    ``target(t)``: the figure-eight's pose (4, 4) t seconds into it. The
    sequence: to its start (``target(0)``) and ``settle_s`` there
    (``settled()`` is called then, when given), EIGHT_S of the figure-eight
    at EIGHT_RATE_HZ, 1 s toward a target at FAR_POSITION (out of reach),
    back to the start and ``back_s`` there. Times are the caller's clock in
    seconds, from 0, as ``run`` advances it. Returns the time at the end.
    """
    start = target(0.0)
    add_target(0.0, start)
    t = run(0.0, settle_s)
    if settled is not None:
        settled()
    t0 = t
    for _ in range(int(round(EIGHT_S * EIGHT_RATE_HZ))):
        add_target(t, target(t - t0))
        t = run(t, 1.0 / EIGHT_RATE_HZ)
    far = start.copy()
    far[:3, 3] = FAR_POSITION
    add_target(t, far)
    t = run(t, 1.0)
    add_target(t, start)
    return run(t, back_s)
