# SPDX-License-Identifier: Apache-2.0

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
  accelerating;
* a moving goal (a trajectory sampled, a twist integrated) comes with its
  own velocity: the step moves with it and closes the gap on top, so the
  arm follows without the lag ``v^2 / (2 a)`` that treating each sample as
  a stopping point would cost (25 mm at 0.5 rad/s on a 1 m arm).

Only when a limit was lowered mid-motion (a parameter change, a new model)
can the constraints contradict each other; the step then brakes as hard as
the acceleration limit allows and keeps the position limits, which may take
the speed above a newly lowered speed limit for the few steps braking needs.
Units: rad and rad/s (m, m/s for prismatic joints); seconds. The functions
here are kernels (the numba subset, see ik_node.core.kernels.base): CPython runs
them for the numpy backend, ik_node.core.kernels.compile compiles them.
"""

import math


def braking_speed(distance, accel, dt):
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


def goal_scale(q, goal, goal_v, dt, v_max, a_max):
    """One factor s in [0, 1] for the velocities ``goal_v + s e / dt``.

    ``goal`` is where the goal is at the end of the step and ``goal_v`` its
    own velocity (zero for a goal that stays put), so ``e = goal - goal_v dt
    - q`` is the gap seen from the goal at the start of the step: s = 1
    closes it exactly (``q' = goal``). s is small enough that no joint
    exceeds its speed limit (given ``|goal_v| <= v_max``) or overshoots the
    goal relative to its motion (braking cap on the gap).
    """
    scale = 1.0
    for i in range(len(q)):
        e = goal[i] - goal_v[i] * dt - q[i]
        if e == 0.0:
            continue
        gap_speed = abs(e) / dt
        ahead = goal_v[i] if e > 0.0 else -goal_v[i]   # goal speed along the gap
        cap = min(v_max[i] - ahead, braking_speed(abs(e), a_max[i], dt))
        scale = min(scale, max(cap, 0.0) / gap_speed)
    return scale


def limited_step(q, v, goal, goal_v, dt, v_max, a_max, lower, upper, q_out, v_out):
    """Move the state (q, v) toward goal for dt seconds within every limit (module docstring).

    Args:
        q: (n,) commanded positions of the previous step.
        v: (n,) commanded velocities of the previous step.
        goal: (n,) wanted positions (a non-finite one brakes to rest).
        goal_v: (n,) the goal's own velocity (a moving goal is followed
            without lag), within the speed limits; zeros for a goal at rest.
        dt: elapsed time, seconds, > 0.
        v_max: (n,) speed limits (> 0, inf allowed).
        a_max: (n,) acceleration limits (> 0, inf allowed).
        lower: (n,) lower position limits (-inf where unbounded).
        upper: (n,) upper position limits (+inf where unbounded).
        q_out: (n,) output: the new positions.
        v_out: (n,) output: the new velocities, ``(q_out - q) / dt``.

    """
    finite = True
    for i in range(len(q)):
        finite = finite and math.isfinite(goal[i]) and math.isfinite(goal_v[i])
    if not finite:
        braking_step(q, v, dt, a_max, lower, upper, q_out, v_out)
        return
    scale = goal_scale(q, goal, goal_v, dt, v_max, a_max)
    for i in range(len(q)):
        want = goal_v[i] + scale * (goal[i] - goal_v[i] * dt - q[i]) / dt
        change = a_max[i] * dt
        lo = max(-v_max[i], v[i] - change, -braking_speed(q[i] - lower[i], a_max[i], dt))
        hi = min(v_max[i], v[i] + change, braking_speed(upper[i] - q[i], a_max[i], dt))
        if lo > hi:  # a limit was lowered mid-motion: brake as hard as allowed
            stop = min(max(0.0, v[i] - change), v[i] + change)
            lo, hi = stop, stop
        vi = min(max(want, lo), hi)
        qi = min(max(q[i] + vi * dt, lower[i]), upper[i])
        q_out[i] = qi
        v_out[i] = (qi - q[i]) / dt


def braking_step(q, v, dt, a_max, lower, upper, q_out, v_out):
    """Brake (q, v) toward rest for dt: every position on one continuous braking curve.

    Each joint follows ``x(t) = q + w t - sign(v) a t^2 / 2`` until it rests
    at ``q + w |w| / (2 a)``, with ``w = sign(v) max(|v| - a dt / 2, 0)``: a
    step of dt is the usual ``v' = v - sign(v) a dt`` while the joint moves
    a whole step, and the last step lands on the curve's end (within the
    acceleration limit: |v - v'| <= a dt). Started from a step's (q1, v1),
    every later step's (q, v) gives the same curve, so the positions of a
    whole stop lie on the curve from (q1, w1) (the collision guard judges
    that one: guard.stepped_braking_velocity); stopping at ``v' = 0`` instead
    ended up to a dt^2 / 8 short in each joint, beside the curve (50 µm at a
    hand). Within the position limits; a_max inf: at rest at once.
    """
    for i in range(len(q)):
        speed = abs(v[i])
        travel = 0.0
        if math.isfinite(a_max[i]) and speed > 0.5 * a_max[i] * dt:
            w = speed - 0.5 * a_max[i] * dt
            t = min(dt, w / a_max[i])
            travel = w * t - 0.5 * a_max[i] * t * t
        qi = q[i] + math.copysign(travel, v[i])
        qi = min(max(qi, lower[i]), upper[i])
        q_out[i] = qi
        v_out[i] = (qi - q[i]) / dt
