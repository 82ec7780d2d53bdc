# SPDX-License-Identifier: Apache-2.0

"""The limiting step: the joints one step toward a goal, within every joint limit and the margin.

:class:`LimitingStep` is the one place a joint command is made
(:class:`ik_node.core.motion.tracker.MotionTracker` asks it each step, the
command stream's braking tail too): the per-joint limiting step toward a
goal (:mod:`ik_node.core.kernels.limits`: position, speed and acceleration
limits, and able to stop before a position limit), then, with a collision
guard, the step admitted only if no pair comes inside the margin or too fast
toward it; else the goal slid along the surface (in the tip's metric for a
pose goal), the straight step toward it, or braking. A braking step (no
goal) is never refused. Its functions of a state are pure: they return the
next (q, v) and change nothing.

Joints are (n,) arrays in chain order: rad (m for prismatic), rad/s, rad/s^2.
"""

import time as _time
from typing import Callable, Iterator, Optional, Tuple, Union

from ik_node.core.collision.guard import Blocked, CollisionGuard
from ik_node.core.ik.stacked import JointUnion
from ik_node.core.kernels import limits
from ik_node.core.model.chain import Chain
from ik_node.core.motion.arrival import ROT_WEIGHT_M
from ik_node.core.motion.costs import TickCosts
from ik_node.core.poses import pose_error
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
_clock = _time.perf_counter
# Teleoperating, a joint's speed limit is never cut below this (rad/s): a
# joint at rest can still start when the tip is at its speed limit.
TIP_SPEED_FLOOR = 1e-6
# Passes of that cut per step (the tip's speed is not linear in the joints'
# over a step: one pass left it up to 3.4 % above; three, 0.002 %).
TIP_SPEED_PASSES = 3
# The limiting step's tip keeps to this share of the tip limits: the jerk
# stage's mean of joint positions and the cubic between grid points move the
# tip up to ~0.2 % faster than the steps they smooth (measured over random twists).
TIP_SPEED_SHARE = 0.99
# The joints' own weight in the metric a pose goal is slid in (task_metric),
# m^2 per rad^2: keeps it positive definite; moves the tip does not feel (a
# redundant arm's self-motion) cost this little.
SLIDE_DAMPING = 1e-4
# What a still joint's rad^2 costs a slid goal (LimitingStep.still), against ~1 for the others.
STILL_WEIGHT = 1e6
# A hold stays reported (blocked, the WARN level) until the steps have gone
# free for this long, s: at the margin, slid and free steps alternate, and a
# status sampled at 1 Hz would flicker between them.
HOLD_REPORTED_FOR = 0.25


class HoldReport:
    """What held the joint command's steps lately: the guard's refusals, slid or braked.

    Attributes:
        blocked: what holds the arm now (a guard.Blocked: pair, distance,
            action), None once the steps have gone free for HOLD_REPORTED_FOR s.
        last_hold: the newest hold, kept when free again (None: none yet).
        holds: steps slid or braked since the guard came.

    """

    def __init__(self):
        """Nothing held yet."""
        self.blocked: Optional[Blocked] = None
        self.last_hold: Optional[Blocked] = None
        self.holds = 0
        self._free_for = 0.0   # s of free steps since the last hold

    def held(self, blocked: Blocked) -> None:
        """Record a step held by ``blocked``."""
        self.blocked = self.last_hold = blocked
        self.holds += 1
        self._free_for = 0.0

    def free(self, dt: float) -> None:
        """Record a step of dt seconds that went as proposed (nothing held it)."""
        self._free_for += dt
        if self._free_for >= HOLD_REPORTED_FOR:
            self.blocked = None


class LimitingStep:
    """The step of a chain's joints within every limit and the margin (module docstring).

    Args:
        chain: the kinematic chain, or the joints of several (JointUnion): position and speed
            limits (the tip speeds and the task metric need a chain to one tip).
        a_max: (n,) acceleration limits, rad/s^2.
        kernels: the limits kernels of the backend (:func:`ik_node.core.kernels.backend.resolve`).
        costs: where the collision checks' wall-clock time is added.

    Attributes:
        a_max: (n,) acceleration limits in force, rad/s^2.
        a_cap: (n,) the most a jerk stage allows, rad/s^2 (inf: no cap).
        a_next: (n,) lowered limits that apply once the joints rest, or None.
        kernels: the backend's limits kernels.
        guard: the collision constraint (None: nothing checked).
        report: what held the steps lately (a HoldReport; new with each guard).
        tip_jacobian: q (n,) -> (6k, n) the tips' Jacobians stacked (several
            end effectors), or None: the chain's tip (task_metric).
        still: q (n,) -> (n,) bool, the joints a slid goal does not move (a hand
            at its target: its arm's joints), or None; or None. Asked only when
            a step is slid.

    """

    def __init__(self, chain: Union[Chain, JointUnion], a_max, kernels, costs: TickCosts):
        """Step ``chain`` at ``a_max`` on ``kernels``; no guard yet."""
        self.chain = chain
        self.a_max = np.array(a_max, dtype=np.float64)
        self.a_cap = np.full(chain.n, np.inf)
        self.a_next: Optional[FloatArray] = None
        self.kernels = kernels
        self.guard: Optional[CollisionGuard] = None
        self.report = HoldReport()
        self.costs = costs
        self.tip_jacobian: Optional[Callable[[FloatArray], FloatArray]] = None
        self.still: Optional[Callable[[FloatArray], Optional[npt.NDArray[np.bool_]]]] = None

    def use_accelerations(self, limits: FloatArray, at_rest: bool) -> None:
        """Take new acceleration limits (n,), rad/s^2: raised ones at once, lowered ones from rest.

        A joint moving at speed cannot stop within a lowered limit before its
        goal or its position limit (0.01 rad/s^2 from 1 rad/s: 50 s, 50 rad).
        So while any joint moves, a lowered limit waits (``a_next``): the
        joints brake to rest at the limits they had, then the new ones apply
        (:meth:`apply_lowered`).
        """
        if np.all(limits >= self.a_max) or at_rest:
            self.a_max, self.a_next = np.array(limits, dtype=np.float64), None
        else:
            self.a_max = np.maximum(self.a_max, limits)   # the raised joints at once
            self.a_next = np.array(limits, dtype=np.float64)

    def apply_lowered(self) -> None:
        """Apply the lowered limits that waited for rest (the joints rest now)."""
        if self.a_next is not None:
            self.a_max, self.a_next = self.a_next, None

    def limited(self, q: FloatArray, v: FloatArray, goal: FloatArray, goal_v: FloatArray,
                dt: float, speeds: Optional[FloatArray] = None) -> Tuple[FloatArray, FloatArray]:
        """Return the limiting step (q', v') from (q, v) toward goal (moving at goal_v) for dt s.

        ``speeds``: (n,) speed limits to use, rad/s (default the chain's). A
        goal of NaN brakes toward rest.
        """
        c = self.chain
        speeds = c.velocity if speeds is None else speeds
        if self.kernels is limits:  # CPython: plain floats are ~10x faster than arrays
            q_out, v_out = [0.0] * c.n, [0.0] * c.n
            limits.limited_step(q.tolist(), v.tolist(), goal.tolist(), goal_v.tolist(),
                                dt, speeds.tolist(), self.a_max.tolist(), c.lower.tolist(),
                                c.upper.tolist(), q_out, v_out)
            return np.array(q_out), np.array(v_out)
        q_new, v_new = np.empty(c.n), np.empty(c.n)
        self.kernels.limited_step(q, v, goal, goal_v, dt, speeds, self.a_max,
                                  c.lower, c.upper, q_new, v_new)
        return q_new, v_new

    def braked(self, q: FloatArray, v: FloatArray, dt: float) -> Tuple[FloatArray, FloatArray]:
        """Return the step (q', v') from (q, v) toward rest for dt s at the acceleration limits."""
        n = self.chain.n
        return self.limited(q, v, np.full(n, np.nan), np.zeros(n), dt)

    def stopping_point(self, q: FloatArray, v: FloatArray) -> FloatArray:
        """Return where braking uniformly at the acceleration limits stops the joints (n,).

        Every joint over the slowest joint's ``T = max |v| / a``, to ``q + v T / 2``
        (within the limits): the motion keeps its direction while it stops.
        """
        c = self.chain
        braking_s = float(np.max(np.abs(v) / self.a_max))
        return np.clip(q + 0.5 * braking_s * v, c.lower, c.upper)

    def can_stop(self, q, v) -> bool:
        """Return True when the joints at q (n,) moving at v (n,) can stop within their limits.

        Braking at the acceleration limits, each joint's speed is at most
        limits.braking_speed of the distance to the position limit it moves
        toward (held for no time): the bound limited_step keeps from step to
        step and needs at the start. From a state beyond it the joint is
        clamped at its limit, a velocity change beyond the acceleration limit.
        """
        c = self.chain
        room = np.where(np.asarray(v) > 0.0, c.upper - np.asarray(q), np.asarray(q) - c.lower)
        return all(abs(float(vi)) <= limits.braking_speed(float(d), float(a), 0.0)
                   for vi, d, a in zip(v, room, self.a_max))

    def step(self, q: FloatArray, v: FloatArray, goal: FloatArray, goal_v: FloatArray,
             dt: float, speeds: Optional[FloatArray] = None,
             in_task: bool = False) -> Tuple[FloatArray, FloatArray]:
        """Return the next (q', v') toward goal (moving at goal_v) for dt, keeping the margin.

        With a collision guard a step that would bring a pair inside the
        margin, or too fast toward it to stop before it, is taken toward the
        goal slid along the surface instead (in the tip's metric when
        ``in_task``: the goal solves a pose), or, refused again, brakes
        toward rest at the limits. A braking step (goal not finite) is never refused.
        """
        q1, v1 = self.limited(q, v, goal, goal_v, dt, speeds)
        if self.guard is None or not np.all(np.isfinite(goal)):
            return q1, v1
        started = _clock()
        try:
            return self._guarded(q, v, q1, v1, goal, dt, speeds, in_task)
        finally:
            self.costs.add('collision', _clock() - started)

    def step_within_tip_speeds(self, q: FloatArray, v: FloatArray, goal: FloatArray,
                               goal_v: FloatArray, dt: float,
                               tip_limits: Optional[Tuple[float, float]],
                               in_task: bool = False, tips=None,
                               speeds: Optional[FloatArray] = None
                               ) -> Tuple[FloatArray, FloatArray]:
        """Return :meth:`step`; with ``tip_limits`` (m/s, rad/s), keep the tip within them.

        Teleoperating, a twist's target leads the arm (TWIST_LEAD_S), and an
        arm catching up with it from rest would move the tip faster than the
        twist, up to 1.5x ``max_linear_speed`` (issue 21). When the step would
        move the tip faster than TIP_SPEED_SHARE of either limit (the ratio r
        of the faster of the two), each joint's speed limit becomes its speed
        in that step / r and the step is taken again: the acceleration limits
        still hold (a joint above its new limit brakes at its limit).

        ``tips``: joints (n,) -> the poses (4, 4) whose speeds count (several end
        effectors: the teleoperated ones); default the chain's tip. ``speeds``:
        (n,) the joints' speed limits to start from (default the chain's).
        """
        q1, v1 = self.step(q, v, goal, goal_v, dt, speeds, in_task=in_task)
        if tip_limits is None:
            return q1, v1
        if tips is None:
            chain = self.chain
            assert isinstance(chain, Chain), 'tip speeds: a chain to one tip, or tips'
            tips = lambda x: [chain.forward(x)]   # noqa: E731
        start = tips(q)
        for _ in range(TIP_SPEED_PASSES):
            ratio = 0.0
            for before, after in zip(start, tips(q1)):
                linear, angular = pose_error(before, after)
                ratio = max(ratio, linear / dt / tip_limits[0], angular / dt / tip_limits[1])
            ratio /= TIP_SPEED_SHARE
            if ratio <= 1.0:
                break
            speeds = np.minimum(np.maximum(np.abs(v1) / ratio, TIP_SPEED_FLOOR),
                                self.chain.velocity if speeds is None else speeds)
            q1, v1 = self.step(q, v, goal, goal_v, dt, speeds, in_task)
        return q1, v1

    def _guarded(self, q: FloatArray, v: FloatArray, q1: FloatArray, v1: FloatArray,
                 goal: FloatArray, dt: float, speeds: Optional[FloatArray],
                 in_task: bool) -> Tuple[FloatArray, FloatArray]:
        """Return the step (q1, v1) if the guard admits it, else the slid or braking one."""
        guard, c = self.guard, self.chain
        assert guard is not None
        refusal = guard.judge(q, q1, v1, self.a_max, c.lower, c.upper, dt)
        if refusal is None:
            self.report.free(dt)
            return q1, v1
        slid = guard.slid_goal(q, goal, refusal, self._slide_metric(q, in_task))
        if slid is not None:
            slid = np.clip(slid, c.lower, c.upper)
            for q2, v2 in self._slid_steps(q, v, slid, dt, speeds):
                if guard.admits(q, q2, v2, self.a_max, c.lower, c.upper, dt):
                    self.report.held(guard.hold(refusal, 'slid'))
                    return q2, v2
        self.report.held(guard.hold(refusal, 'braked'))
        return self.limited(q, v, np.full(c.n, np.nan), np.zeros(c.n), dt, speeds)

    def _slide_metric(self, q: FloatArray, in_task: bool) -> Optional[FloatArray]:
        """Return the metric a goal is slid in (None: joint space's), still joints held.

        A joint in ``still`` costs STILL_WEIGHT per rad^2: the slide moves it
        by about 1e-6 of the others' motion.
        """
        metric = self.task_metric(q) if in_task else None
        still = None if self.still is None else self.still(q)
        if still is None or not np.any(still):
            return metric
        base = np.eye(self.chain.n) if metric is None else metric
        return base + STILL_WEIGHT * np.diag(still.astype(np.float64))

    def task_metric(self, q: FloatArray) -> FloatArray:
        """Return (n, n) J^T W J + SLIDE_DAMPING I at q: the tip's motion per joint step.

        W weighs a radian of the tip's rotation as ROT_WEIGHT_M metres. A goal
        slid in this metric moves the tip along the surface toward its pose
        (issue 50: in joint space's own, the demo's tip dove under the shelf's top).
        With several tips (``tip_jacobian``) the sum over them: a hand held
        by a shelf slides without moving the other hand (in joint space's
        metric the slide moved the torso they share, and the other hand
        left its target by 1-5 cm).
        """
        if self.tip_jacobian is not None:
            jac = self.tip_jacobian(q)
        else:
            chain = self.chain
            assert isinstance(chain, Chain), 'task metric: a chain to one tip, or tip_jacobian'
            jac = chain.jacobian(q)
        jac = jac.reshape(-1, 6, self.chain.n)
        jac[:, 3:] *= ROT_WEIGHT_M
        jac = jac.reshape(-1, self.chain.n)
        return jac.T @ jac + SLIDE_DAMPING * np.eye(self.chain.n)

    def _slid_steps(self, q: FloatArray, v: FloatArray, slid: FloatArray, dt: float,
                    speeds: Optional[FloatArray]) -> Iterator[Tuple[FloatArray, FloatArray]]:
        """Yield the steps (q', v') toward the slid goal (n,) to try, in order."""
        yield self.limited(q, v, slid, np.zeros(self.chain.n), dt, speeds)
        along = step_along(q, v, slid, dt,
                           self.chain.velocity if speeds is None else speeds, self.a_max)
        if along is not None:
            yield along


def step_along(q: FloatArray, v: FloatArray, aim: FloatArray, dt: float, v_max: FloatArray,
               a_max: FloatArray) -> Optional[Tuple[FloatArray, FloatArray]]:
    """Return the step (q', v') along the straight line from q toward ``aim``, or None.

    The limiting step cuts each joint's acceleration on its own, so a step
    that speeds up toward a far goal leaves the direction of ``aim - q``;
    next to a surface that bend can turn a way out into a way in. This step
    keeps the direction: ``v' = s (aim - q) / dt`` with the largest s in
    [0, 1] that every joint's speed limit, acceleration limit (from v) and
    braking (to stop by ``aim``) allow. None when no s > 0 does (v points
    elsewhere by more than one step's acceleration can undo).

    Args:
        q: (n,) positions now, rad (m).
        v: (n,) velocities now, rad/s.
        aim: (n,) where to head, within the position limits.
        dt: the step, s (> 0).
        v_max: (n,) speed limits, rad/s.
        a_max: (n,) acceleration limits, rad/s^2 (inf allowed).

    """
    x = aim - q
    still = x == 0.0
    change = a_max * dt
    if np.all(still) or not np.all(np.abs(v[still]) <= change[still]):
        return None
    rate, moving = x[~still] / dt, ~still
    with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
        ends = np.stack([(v[moving] - change[moving]) / rate,
                         (v[moving] + change[moving]) / rate])
        ad = change[moving]
        twice = 2.0 * a_max[moving] * np.abs(x[moving])
        brake = np.where(np.isinf(ad), np.inf, twice / (ad + np.sqrt(ad * ad + twice)))
    low = max(0.0, float(np.max(ends.min(axis=0))))
    high = min(1.0, float(np.min(ends.max(axis=0))),
               float(np.min(np.minimum(v_max[moving], brake) / np.abs(rate))))
    if not high > low:
        return None
    q_new = q + high * x
    return q_new, (q_new - q) / dt   # as the limiting step: the velocity of the positions
