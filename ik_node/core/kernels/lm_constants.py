# SPDX-License-Identifier: Apache-2.0

"""The constants of the Levenberg-Marquardt descent (:mod:`ik_node.core.kernels.lm`).

The descent and the tests' numpy reference of it (test/helpers/ik_reference.py)
read them from here; numba reads them when it compiles the descent.
"""

# Levenberg-Marquardt damping (same units as A: metres and radians).
DAMPING_START = 1e-4
DAMPING_MIN = 1e-6
DAMPING_MAX = 1e3
DAMPING_DOWN = 0.2
DAMPING_UP = 10.0

# Residual norm (weighted metres + radians) above which the null-space bias
# toward the seed acts at full gain; below, it shrinks in proportion.
BIAS_FULL_ABOVE = 0.1

# An attempt is abandoned as a local minimum when the cost has fallen by
# less than this fraction over STALL_WINDOW accepted iterations. Loose
# values stop too early on the slow (linear) approach to a singular optimum,
# e.g. the stretched arm for a target out of reach (measured: 5 cm short).
STALL_FRACTION = 1e-5
STALL_WINDOW = 8

# What a descent solves (JacobianIK's ``goal``): the rows of its residual
# [position block (3); orientation block (3)] that count.
TASK_POSE = 0          # position and rotation vector: the full pose
TASK_POSITION = 1      # position only, the orientation free
TASK_ORIENTATION = 2   # rotation vector only, the position free
TASK_AXIS = 3          # position, and the tool axis along the target's (chord d - a)
TASK_LOOK_AT = 4       # the tool axis pointing at the target's position (chord d - a)
# Below this distance (m) from the point it looks at, a look-at has no direction:
# its error counts as zero.
LOOK_AT_NEAREST = 1e-9
# An axis task puts its position first: where both cannot be met, a radian of
# the axis weighs this many metres (the descent's axis rows weighted by it in
# JacobianIK's position-first search; the local steps' acceptance,
# kernels.follow.better; answers compared by it, ik.task.Task.cost).
AXIS_PRIORITY = 1e-3
# An axis task's position is held when this near (m): the position-first answers
# compete by their axis within it (JacobianIK._position_first).
POSITION_HELD = 1e-4
