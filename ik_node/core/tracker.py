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

"""The motion policy: target poses in, joint commands out, safe by construction.

A :class:`MotionTracker` takes target poses (time, 4x4 pose in the chain's
base frame), an optional elbow pole, resets, configuration changes and
model changes, and produces the joint command (positions, velocities) for a
given time. Times are the caller's clock in seconds; every step uses the
real time elapsed since the previous command.

Where the joints are headed (the goal) depends on the mode:

* smoothing on: the Cartesian trajectory through the targets (cubic in
  exp-map space, timed by the tip speed limits) is sampled and solved;
* smoothing off: the newest target is solved directly;
* reset: the initial joint positions, in joint space;

each IK solve warm-started from the current command, with the fallback rule
for unreachable targets (:meth:`MotionTracker._goal_of`). Whatever the
mode, the command then goes through the one limiting step
(:func:`ik_node.core.limits.limited_step`, compiled when numba is there):
joint speed and acceleration limits for the elapsed time, position limits
with braking, never NaN. So the
guarantees hold in every mode, across mode switches, resets, parameter and
model changes, by construction.
"""

import collections
from dataclasses import dataclass, field
import math
import time as _time
from typing import Deque, List, Optional, Tuple

from ik_node.core import limits
from ik_node.core.backend import load_compiled
from ik_node.core.chain import Chain, pose_matrix
from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.kernels import quat_to_matrix
from ik_node.core.result import IKResult, IKSolver, pose_error
from ik_node.core.rotations import matrix_to_quaternion
from ik_node.core.trajectory import CartesianTrajectory
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Targets farther from the base than this times the chain's reach bound are
# pulled onto that sphere (they are out of reach either way, and a target a
# kilometre off would keep the trajectory busy for hours).
WORKSPACE_MARGIN = 1.25
# At an unreachable target that no longer moves, a new closest pose replaces
# the chosen one only when its squared residual is this fraction smaller.
FALLBACK_GAIN = 0.01
# A goal this close to the current command in every joint (rad or m) is the
# current command: the solvers' answers for a held pose differ by ~1e-16 from
# tick to tick, and chasing that kept the arm "moving" at ~1e-15 rad/s. Also
# when a reset is over (with the joints at rest).
ARRIVED = 1e-12
# Solve times kept for the percentiles of the diagnostics.
SOLVE_TIME_WINDOW = 1000

MODES = ('trajectory', 'direct', 'reset')


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

    """

    smoothing: bool = True
    max_linear_speed: float = 0.5
    max_angular_speed: float = 1.0
    max_joint_acceleration: float = 5.0
    joint_acceleration_limits: Tuple[float, ...] = ()
    ik_timeout: float = 0.005

    def check(self, n: Optional[int] = None) -> 'TrackerConfig':
        """Return self when every value is valid (for n joints, when given).

        Raises:
            InvalidInputError: naming the first invalid value and the valid range.

        """
        for name in ('max_linear_speed', 'max_angular_speed', 'max_joint_acceleration',
                     'ik_timeout'):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 < value < math.inf):
                raise InvalidInputError(f'{name}: expected a finite number > 0, received '
                                        f'{value!r}')
        limits = self.joint_acceleration_limits
        if not all(isinstance(a, (int, float)) and 0.0 < a < math.inf for a in limits):
            raise InvalidInputError(f'joint_acceleration_limits: expected finite numbers > 0, '
                                    f'received {list(limits)}')
        if limits and n is not None and len(limits) != n:
            raise InvalidInputError(f'joint_acceleration_limits: expected {n} values (one per '
                                    f'joint, chain order) or none, received {len(limits)}')
        return self

    def accelerations(self, n: int) -> List[float]:
        """Per-joint acceleration limits (n) in chain order."""
        if self.joint_acceleration_limits:
            return [float(a) for a in self.joint_acceleration_limits]
        return [float(self.max_joint_acceleration)] * n


@dataclass(frozen=True, eq=False)
class Command:
    """One joint command: positions (n,) and velocities (n,) at ``time`` (s, caller's clock)."""

    q: FloatArray
    v: FloatArray
    time: float


@dataclass
class SolveStats:
    """What the last solves did, for the diagnostics."""

    last_result: Optional[IKResult] = None
    last_solve_s: float = 0.0
    times: Deque[float] = field(default_factory=lambda: collections.deque(
        maxlen=SOLVE_TIME_WINDOW))

    def timed(self, solve, *args, **kwargs) -> IKResult:
        """Run ``solve`` and record its wall-clock time."""
        start = _time.perf_counter()
        res = solve(*args, **kwargs)
        self.last_solve_s = _time.perf_counter() - start
        self.times.append(self.last_solve_s)
        return res


class MotionTracker:
    """Targets in, joint commands out (see the module docstring).

    Args:
        chain: the arm's chain.
        solver: its IK solver (IKSolver: the tracker never asks which).
        config: a TrackerConfig (checked here).
        q0: (n,) initial joint positions, within the limits; also where
            :meth:`reset` goes.
        time: the caller's clock now, seconds.
        velocity: (n,) initial velocities (default at rest), e.g. carried
            over from the tracker of a previous model.
        backend: 'auto', 'numpy' or 'numba' for the limiting step.

    Raises:
        InvalidInputError: an invalid config, or q0 not finite / not within
            the limits.

    """

    def __init__(self, chain: Chain, solver: IKSolver, config: TrackerConfig, q0,
                 time: float, velocity=None, backend: str = 'auto'):
        """Start at rest (or at ``velocity``) at q0, with no target but the current pose."""
        self.chain = chain
        self.solver = solver
        self.config = config.check(chain.n)
        q0 = chain.check_q(q0, 'q0')
        if not chain.within_limits(q0):
            raise InvalidInputError(f'q0: {q0.tolist()} is outside the joint limits of '
                                    f'{chain.joint_names}')
        self.q0 = q0.copy()
        self.q = q0.copy()
        self.v = np.zeros(chain.n) if velocity is None else np.array(velocity, dtype=np.float64)
        self.time = float(time)
        (compiled,) = load_compiled(backend, '_compiled')
        self._limits = limits if compiled is None else compiled.L
        self._a_max = np.array(self.config.accelerations(chain.n))
        self.reach = chain.reach_bound()
        self.stats = SolveStats()
        self.pole: Optional[FloatArray] = None
        self.targets_clamped = 0
        tip = chain.forward(q0)
        self.target = tip
        self.target_result: Optional[IKResult] = None
        self._target_unchecked = False
        self._fallback: Optional[Tuple[FloatArray, float, FloatArray]] = None
        self.trajectory = CartesianTrajectory(
            tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), self.time,
            max_linear_speed=self.config.max_linear_speed,
            max_angular_speed=self.config.max_angular_speed)
        self.mode = 'trajectory' if self.config.smoothing else 'direct'
        solver.set_budget(self.config.ik_timeout)

    # -- state ------------------------------------------------------------------------

    @property
    def joint_names(self) -> List[str]:
        """Joint names, chain order."""
        return self.chain.joint_names

    def command_now(self) -> Command:
        """Return the last command given (the initial state before any)."""
        return Command(self.q.copy(), self.v.copy(), self.time)

    def planned_positions(self) -> FloatArray:
        """(k, 3) tip positions (m, base frame) the trajectory will pass, from where it is."""
        return self.trajectory.planned_positions()

    # -- inputs -----------------------------------------------------------------------

    def add_target(self, time: float, target: FloatArray) -> str:
        """Take a new target pose (4, 4), base frame, valid (checked by the caller).

        Returns:
            'accepted', 'retimed' or 'duplicate' (the trajectory's verdict;
            'accepted' without smoothing), after pulling a target beyond the
            workspace onto it (counted in ``targets_clamped``).

        """
        target = self._within_workspace(np.array(target, dtype=np.float64))
        self.target = target
        self._target_unchecked = True
        if self.mode == 'reset':
            self._restart_trajectory(time)
            self.mode = 'trajectory' if self.config.smoothing else 'direct'
        if self.mode == 'direct':
            return 'accepted'
        return self.trajectory.add_key(time, target[:3, 3],
                                       matrix_to_quaternion(target[:3, :3]))

    def set_pole(self, pole: Optional[FloatArray]) -> None:
        """Set (or clear, None) the elbow pole point (3,), base frame, metres."""
        self.pole = None if pole is None else np.array(pole, dtype=np.float64)

    def reset(self, time: float) -> None:
        """Go back to the initial joint positions, in joint space, within the limits."""
        self.mode = 'reset'
        self.target = self.chain.forward(self.q0)
        self.target_result, self._target_unchecked = None, False
        self._fallback = None

    def configure(self, config: TrackerConfig, time: float) -> None:
        """Apply new settings without a jump (a lowered limit applies as fast as braking allows).

        Turning smoothing on restarts the trajectory at the current tip pose,
        headed for the newest target; turning it off heads straight for it.

        Raises:
            InvalidInputError: an invalid config (nothing changes).

        """
        config.check(self.chain.n)
        self.solver.set_budget(config.ik_timeout)
        self._a_max = np.array(config.accelerations(self.chain.n))
        self.trajectory.max_linear_speed = config.max_linear_speed
        self.trajectory.max_angular_speed = config.max_angular_speed
        was_smooth, self.config = self.config.smoothing, config
        if config.smoothing != was_smooth and self.mode != 'reset':
            if config.smoothing:
                self._restart_trajectory(time)
                self.mode = 'trajectory'
            else:
                self.mode = 'direct'

    def set_solver(self, solver: IKSolver) -> None:
        """Use another solver for the same chain (e.g. the solver parameter changed)."""
        solver.set_budget(self.config.ik_timeout)
        self.solver = solver
        self._fallback = None

    def _restart_trajectory(self, time: float) -> None:
        """Start the trajectory at rest at the current tip pose, headed for the target."""
        tip = self.chain.forward(self.q)
        self.trajectory.reset(tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), time)
        self.trajectory.add_key(time, self.target[:3, 3],
                                matrix_to_quaternion(self.target[:3, :3]))

    def _within_workspace(self, target: FloatArray) -> FloatArray:
        """Pull a target beyond WORKSPACE_MARGIN x the reach bound onto that sphere."""
        radius = WORKSPACE_MARGIN * self.reach
        distance = float(np.linalg.norm(target[:3, 3]))
        if distance > radius:
            self.targets_clamped += 1
            target[:3, 3] *= radius / distance
        return target

    # -- output -----------------------------------------------------------------------

    def command(self, time: float) -> Command:
        """Return the joint command at ``time`` (caller's clock, seconds).

        A time not after the last command's repeats it (no motion in no time).
        """
        dt = float(time) - self.time
        if not dt > 0.0:
            return self.command_now()
        goal = self._goal(time)
        if np.all(np.abs(goal - self.q) <= ARRIVED):
            goal = self.q
        self.q, self.v = self._step(goal, dt)
        self.time = float(time)
        if self.mode == 'reset' and self._arrived(goal):
            self.mode = 'trajectory' if self.config.smoothing else 'direct'
            self._restart_trajectory(time)
        return self.command_now()

    def check_reachability(self) -> Optional[IKResult]:
        """Solve the newest target from the current joints once; None if already checked.

        The result (reachable or not, and why) is kept in ``target_result``.
        """
        if not self._target_unchecked:
            return None
        self._target_unchecked = False
        self.target_result = self._solve(self.target)
        return self.target_result

    def _step(self, goal: FloatArray, dt: float) -> Tuple[FloatArray, FloatArray]:
        """Take the limiting step toward goal for dt on this tracker's backend."""
        c = self.chain
        if self._limits is limits:  # CPython: plain floats are ~10x faster than arrays
            q_out, v_out = [0.0] * c.n, [0.0] * c.n
            limits.limited_step(self.q.tolist(), self.v.tolist(), goal.tolist(), dt,
                                c.velocity.tolist(), self._a_max.tolist(), c.lower.tolist(),
                                c.upper.tolist(), q_out, v_out)
            return np.array(q_out), np.array(v_out)
        q_new, v_new = np.empty(c.n), np.empty(c.n)
        self._limits.limited_step(self.q, self.v, goal, dt, c.velocity, self._a_max, c.lower,
                                  c.upper, q_new, v_new)
        return q_new, v_new

    def _arrived(self, goal: FloatArray) -> bool:
        return bool(np.all(np.abs(self.q - goal) <= ARRIVED) and np.all(self.v == 0.0))

    def _goal(self, time: float) -> FloatArray:
        """Joint positions (n,) to head for at ``time`` in the current mode."""
        if self.mode == 'reset':
            return self.q0
        if self.mode == 'direct':
            pose, final = self.target, True
        else:
            s = self.trajectory.sample(time)
            pose, final = pose_matrix(_rotation9(s.quaternion), s.position), s.at_rest
        res = self._solve(pose)
        if self.mode == 'direct' and self._target_unchecked:
            # The newest target solved from the current joints: that is the
            # reachability check, no need to solve it twice.
            self._target_unchecked = False
            self.target_result = res
        elif final and res.success and not self._target_unchecked and \
                self.target_result is not None and not self.target_result.success:
            # The arm got to the target after all: a reachability check that
            # ran out of budget from farther away is superseded by arrival.
            self.target_result = res
        return self._goal_of(pose, res)

    def _solve(self, pose: FloatArray) -> IKResult:
        res = self.stats.timed(self.solver.solve, pose, self.q, pole=self.pole)
        self.stats.last_result = res
        return res

    def _goal_of(self, pose: FloatArray, res: IKResult) -> FloatArray:
        """Joints (n,) to move toward: the solution, or on failure the best one known.

        A failed solve returns the closest pose its attempt found; the Jacobian
        solver's random restarts find a different one each time, and chasing
        them made the arm wander for ever at an unreachable target. So a
        failed result is taken only when it is closer to ``pose`` than the
        current joints are, and while ``pose`` stays the same (the arm has
        arrived where the trajectory ends) only when it beats the goal
        already chosen by FALLBACK_GAIN: the arm settles.
        """
        if res.success:
            self._fallback = None
            return res.q
        cost = res.position_error ** 2 + res.orientation_error ** 2
        kept = self._fallback
        if kept is not None and np.array_equal(kept[0], pose):
            if cost < kept[1] * (1.0 - FALLBACK_GAIN):
                kept = self._fallback = (kept[0], cost, res.q)
            return kept[2]
        pos, rot = pose_error(pose, self.chain.forward(self.q))
        held = pos * pos + rot * rot
        goal, best = (res.q, cost) if cost < held else (self.q.copy(), held)
        self._fallback = (pose.copy(), best, goal)
        return goal


def _rotation9(quaternion: FloatArray) -> Tuple[float, ...]:
    """Row-major rotation 9-tuple of a unit quaternion (x, y, z, w)."""
    x, y, z, w = quaternion.tolist()
    return quat_to_matrix(x, y, z, w)


def carried_over(old: MotionTracker, chain: Chain, solver: IKSolver, q0,
                 time: float) -> MotionTracker:
    """Return a tracker for a new model of the arm, continuing the old one's motion.

    With the same joint names the command carries on from the old state
    (positions and velocities: no jump); the new model's limits must contain
    the current positions. A model with other joints is another robot: its
    tracker starts at rest at q0.

    Raises:
        ModelError: same joints, but the current positions are outside the
            new model's limits (refuse the model: following it would jump).

    """
    if chain.joint_names != old.joint_names:
        return MotionTracker(chain, solver, old.config, q0, time)
    q = old.q
    if not chain.within_limits(q):
        raise ModelError(f'the current joint positions {np.round(q, 6).tolist()} are outside '
                         "the new model's limits: following it would jump")
    tracker = MotionTracker(chain, solver, old.config, q, old.time, velocity=old.v)
    tracker.q0 = chain.check_q(q0, 'q0').copy()
    tracker.set_pole(old.pole)
    return tracker
