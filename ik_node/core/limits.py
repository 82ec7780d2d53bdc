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

"""The one limiting step every joint command goes through.

:func:`limited_step` moves a commanded joint state (q, v) toward a goal for a
real elapsed time dt so that, per joint:

* the speed is within its limit, ``|v'| <= v_max``;
* the velocity changes by at most ``a_max dt`` (no jump: a move from rest,
  a reset, a new target all ramp up);
* the position stays within its limits, and the joint brakes in time: after
  the step it can still stop before the limit at ``a_max``. With velocity v'
  held for dt, the joint travels v' dt and then needs v'^2 / (2 a) to stop,
  so ``v' <= brake(d) = -a dt + sqrt((a dt)^2 + 2 a d)`` for the distance d
  to the limit. If that held at the previous step, braking at the full
  ``a_max dt`` always satisfies it again, for any dt: the constraints never
  contradict each other (the property tests check it over random steps);
* it does not overshoot the goal when it can avoid it (the same cap on the
  distance to the goal), and all joints are scaled by one factor toward the
  goal so the arm keeps the direction of its joint-space path while not
  accelerating.

Only when a limit was lowered mid-motion (a parameter change, a new model)
can the constraints contradict each other; the step then brakes as hard as
the acceleration limit allows and keeps the position limits, which may take
the speed above a newly lowered speed limit for the few steps braking needs.
Units: rad and rad/s (m, m/s for prismatic joints); seconds.
"""

import math
from typing import List, Sequence, Tuple


def braking_speed(distance: float, accel: float, dt: float) -> float:
    """Largest speed v (>= 0) held for dt after which the joint can still stop within distance.

    Solves ``v dt + v^2 / (2 a) = d`` (d <= 0 gives 0; a = inf gives inf), as
    ``2 a d / (a dt + sqrt((a dt)^2 + 2 a d))``: the same root without the
    cancellation of ``-a dt + sqrt(...)``, which rounds to 0 for a distance
    below ~1e-17 and would freeze every joint scaled with that one.
    """
    if distance <= 0.0:
        return 0.0
    if math.isinf(accel):
        return math.inf
    ad = accel * dt
    twice = 2.0 * accel * distance
    return twice / (ad + math.sqrt(ad * ad + twice))


def limited_step(q: Sequence[float], v: Sequence[float], goal: Sequence[float], dt: float,
                 v_max: Sequence[float], a_max: Sequence[float], lower: Sequence[float],
                 upper: Sequence[float]) -> Tuple[List[float], List[float]]:
    """Move the state (q, v) toward goal for dt seconds within every limit (module docstring).

    Args:
        q, v: (n,) commanded positions and velocities of the previous step.
        goal: (n,) wanted positions (finite; a non-finite goal holds: brakes to rest).
        dt: elapsed time, seconds, > 0.
        v_max, a_max: (n,) speed and acceleration limits (> 0, inf allowed).
        lower, upper: (n,) position limits (+-inf where unbounded).

    Returns:
        (q', v') lists of floats, with ``v' = (q' - q) / dt``.

    """
    n = len(q)
    finite_goal = all(math.isfinite(g) for g in goal)
    # Wanted velocities: straight to the goal, scaled by one factor so that no
    # joint exceeds its speed limit or overshoots its goal.
    scale = 1.0
    wanted = [0.0] * n
    if finite_goal:
        for i in range(n):
            e = goal[i] - q[i]
            want = e / dt
            cap = min(v_max[i], braking_speed(abs(e), a_max[i], dt))
            if abs(want) > cap > 0.0:
                scale = min(scale, cap / abs(want))
            wanted[i] = want
    q_new, v_new = [0.0] * n, [0.0] * n
    for i in range(n):
        change = a_max[i] * dt
        lo = max(-v_max[i], v[i] - change, -braking_speed(q[i] - lower[i], a_max[i], dt))
        hi = min(v_max[i], v[i] + change, braking_speed(upper[i] - q[i], a_max[i], dt))
        if lo > hi:  # a limit was lowered mid-motion: brake as hard as allowed
            lo, hi = v[i] - change, v[i] + change
            lo, hi = min(max(0.0, lo), hi), min(max(0.0, lo), hi)
        vi = min(max(scale * wanted[i], lo), hi)
        qi = min(max(q[i] + vi * dt, lower[i]), upper[i])
        q_new[i] = qi
        v_new[i] = (qi - q[i]) / dt
    return q_new, v_new
