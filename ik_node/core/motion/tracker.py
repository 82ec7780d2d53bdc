# SPDX-License-Identifier: Apache-2.0

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
for unreachable targets (:class:`ik_node.core.motion.goals.GoalSelector`);
twists go through :class:`ik_node.core.motion.teleop.TwistInput`, the
drift toward a preferred posture through
:class:`ik_node.core.motion.posture.PostureDrift`. Whatever the
mode, the command then goes through the one limiting step
(:func:`ik_node.core.kernels.limits.limited_step`, compiled when numba is there):
joint speed and acceleration limits for the elapsed time, position limits
with braking, never NaN. So the
guarantees hold in every mode, across mode switches, resets, parameter and
model changes, by construction.
"""

import time as _time
from typing import List, Optional, Tuple

from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.errors import InvalidInputError
from ik_node.core.ik.base import IKResult, IKSolver
from ik_node.core.kernels.backend import resolve
from ik_node.core.model.chain import Chain
from ik_node.core.motion.arrival import Arrival
# TrackerConfig and ACCELERATION_RANGE are also public here (their first home).
from ik_node.core.motion.config import ACCELERATION_RANGE, TrackerConfig  # noqa: F401
from ik_node.core.motion.goals import GoalSelector
from ik_node.core.motion.joints import JointMotion
from ik_node.core.motion.mode import Mode
from ik_node.core.motion.posture import PostureDrift
from ik_node.core.motion.route import Recovery
# Command and TrackerStatus are also public here (their first home).
from ik_node.core.motion.status import Command, TrackerStatus  # noqa: F401
from ik_node.core.motion.teleop import TwistInput
from ik_node.core.motion.trajectory import CartesianTrajectory
from ik_node.core.motion.workspace import WorkspaceSphere
from ik_node.core.poses import pose_error, pose_matrix, rotation9
from ik_node.core.rotations import matrix_to_quaternion
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
_clock = _time.perf_counter

# A goal this close to the current command in every joint (rad or m) is the
# current command: the solvers' answers for a held pose differ by ~1e-16 from
# tick to tick, and chasing that kept the arm "moving" at ~1e-15 rad/s. Also
# when a reset is over (with the joints at rest).
ARRIVED = 1e-12

# A trajectory's end pose this close to the target (m, rad) is the target (its
# question is the target's: the same key, the same answer).
SAME_POSE = 1e-9


class MotionTracker(JointMotion):
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
        worker: answers the open-ended questions (ik_node.core.motion.worker;
            default an ImmediateWorker: in the caller's thread, as it asks).

    Raises:
        InvalidInputError: an invalid config, or q0 not finite / not within
            the limits.

    """

    def __init__(self, chain: Chain, solver: IKSolver, config: TrackerConfig, q0,
                 time: float, velocity=None, backend: str = 'auto', worker=None):
        """Start at rest (or at ``velocity``) at q0, with no target but the current pose."""
        self._start_joints(chain, config, q0, time, velocity)
        self.drift = PostureDrift(chain, self.config.posture)
        self.workspace = WorkspaceSphere(chain.reach_bound())   # far targets pulled in
        self.goals = GoalSelector(chain, solver, worker)
        self.set_backend(backend)
        self.pole: Optional[FloatArray] = None
        tip = chain.forward(q0)
        self.target = tip
        self.trajectory = CartesianTrajectory(
            tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), self.time,
            max_linear_speed=self.config.max_linear_speed,
            max_angular_speed=self.config.max_angular_speed)
        self.mode = self._pose_mode()
        self.twists = TwistInput()
        self._has_target = False   # a target, twist or reset came (else: hold where it is)
        self._stop_q = self.q
        #: Progress toward the target; rest and paths when there is none (route.py).
        self.recovery = Recovery(chain)
        self.recovery.task = self.drift.task = solver.task
        self._goal_in_task = False   # the step's goal solves a pose (slid in the tip's metric)
        solver.set_budget(self.config.ik_timeout)

    # -- state ------------------------------------------------------------------------

    def use_guard(self, guard: Optional[CollisionGuard]) -> None:
        """Check every step against ``guard``; the worker prefers free solutions (None: none)."""
        super().use_guard(guard)
        self.goals.guard = guard

    @property
    def worker(self):
        """The worker answering the open-ended questions (a session pauses it in a tick)."""
        return self.goals.worker

    @property
    def joint_names(self) -> List[str]:
        """Joint names, chain order."""
        return self.chain.joint_names

    @property
    def solver(self) -> IKSolver:
        """The IK solver in use (set_solver replaces it)."""
        return self.goals.solver

    @property
    def target_result(self) -> Optional[IKResult]:
        """The newest target's reachability check (None before one, or for a twist / reset)."""
        return self.goals.target_result

    @property
    def has_target(self) -> bool:
        """Return True once a target, twist or reset came (before: holding where it started)."""
        return self._has_target

    @property
    def teleoperating(self) -> bool:
        """Return True while a twist is held (mode 'twist', not released)."""
        return self.mode == Mode.TWIST and self.twists.twist is not None

    def status(self) -> TrackerStatus:
        """Return a snapshot of the mode, the solves and the counts (for diagnostics)."""
        return TrackerStatus.of(self)

    def arrival(self, q: Optional[FloatArray] = None, v: Optional[FloatArray] = None
                ) -> Arrival:
        """Return the arm at (q, v) (n,) against its target (ik_node.core.motion.arrival).

        Default: the last command (a session passes what its plan holds now:
        MotionSession.arrival).
        """
        blocked = self.stepper.report.blocked
        held = self.goals.held
        return self.recovery.arrival(self.q if q is None else q, self.v if v is None else v,
                                     self.target, self.mode, self.goals.target_result,
                                     blocked, self.time, None if held is None else held.q,
                                     self.goals.seeking)

    # -- inputs -----------------------------------------------------------------------

    def add_target(self, time: float, target: FloatArray) -> str:
        """Take a new target pose (4, 4), base frame, valid (checked by the caller).

        Returns:
            'accepted', 'retimed' or 'duplicate' (the trajectory's verdict;
            'accepted' without smoothing), after pulling a target beyond the
            workspace onto it (counted in ``targets_clamped``).

        """
        task = self.solver.task
        # What the task leaves free, from the tip (a trajectory's end); a point
        # looked at may lie beyond the arm's reach.
        target = task.complete(np.array(target, dtype=np.float64), self.chain.forward(self.q))
        if task.uses_position:
            target = self.workspace(target)
        self.target = target
        self.goals.new_target()
        self._has_target = True
        if self.mode in (Mode.RESET, Mode.TWIST):
            self.twists.twist = None
            self._restart_trajectory(time)
            self.mode = self._pose_mode()
        if self.mode == Mode.DIRECT:
            return 'accepted'
        return self.trajectory.add_key(time, target[:3, 3],
                                       matrix_to_quaternion(target[:3, :3]))

    def set_pole(self, pole: Optional[FloatArray]) -> None:
        """Set (or clear, None) the elbow pole point (3,), base frame, metres."""
        self.pole = None if pole is None else np.array(pole, dtype=np.float64)

    def set_twist(self, time: float, linear, angular, body: bool = False) -> None:
        """Teleoperate: move the target with a twist until the next one (or the timeout).

        Args:
            time: the caller's clock, seconds.
            linear: (3,) m/s, of the tip origin.
            angular: (3,) rad/s.
            body: False: both vectors in the base frame (angular velocity in
                world axes, about the tip origin); True: in the tip frame.

        A twist faster than ``max_linear_speed`` or ``max_angular_speed`` is
        scaled down as a whole (direction kept), counted in ``twists_scaled``.
        Each twist holds from its ``time`` until the next one or until
        ``twist_timeout`` has passed (then the arm stops: a dead-man); the
        target is integrated over exactly that time with the exact
        exponential-map update of seed 003 (:func:`integrate_twist`), so a
        twist takes effect when it arrives, not at the next command. A zero
        twist, or the timeout, releases: the arm brakes to rest at once.

        Raises:
            InvalidInputError: the task is a look-at (nothing changes).

        """
        if not self.solver.task.smooth:
            raise InvalidInputError('target_twist: a twist moves the tip, and the look_at task '
                                    'aims the tool at a point: send target points instead')
        lin, ang = self.twists.within_tip_limits(
            np.array(linear, dtype=np.float64), np.array(angular, dtype=np.float64),
            self.config.max_linear_speed, self.config.max_angular_speed)
        self._has_target = True
        if self.mode != Mode.TWIST:
            self.mode = Mode.TWIST
            self.target = self.chain.forward(self.q)
            self.goals.no_target()
            self.twists.restart_clock(float(time))
        else:
            self._move_twist_target(float(time))
        if not self.twists.hold(float(time), lin, ang, body):
            self._release()

    def _release(self) -> None:
        """Stop teleoperating: head for where braking at the acceleration limits stops the arm.

        Every joint brakes uniformly over the same time, the slowest joint's
        ``T = max |v| / a``, to ``q + v T / 2`` (within the limits): the arm
        keeps the direction of its joint motion while it stops and does not
        come back. The target becomes that pose.
        """
        self.twists.twist = None
        self._stop_q = self.stepper.stopping_point(self.q, self.v)
        self.target = self.chain.forward(self._stop_q)

    def sync(self, time: float, q_measured, v_measured=None) -> None:
        """Continue from the measured joint state (feedback: at start, after a push, ...).

        The command becomes the measured positions (clipped into the position
        limits) and velocities (clipped into the speed limits; zero when not
        measured or not finite); the trajectory restarts there,
        headed for the newest target, or, before any target came, holding
        where the arm is (it does not go to q0 by itself).
        """
        self.q, self.v = self.measured_state(q_measured, v_measured)
        self.time = float(time)
        self.goals.forget_fallback()
        self.recovery.forget()
        self.feed.forget()
        if not self._has_target:
            self.target = self.chain.forward(self.q)
        if self.mode == Mode.TRAJECTORY:
            self._restart_trajectory(time)
        elif self.mode == Mode.TWIST:
            self._release()

    def reset(self, time: float) -> None:
        """Go back to the initial joint positions, in joint space, within the limits."""
        self.mode = Mode.RESET
        self._has_target = True
        self.twists.twist = None
        self.target = self.chain.forward(self.q0)
        self.goals.no_target()

    def configure(self, config: TrackerConfig, time: float) -> None:
        """Apply new settings without a jump (a lowered limit applies as fast as braking allows).

        Turning smoothing on restarts the trajectory at the current tip pose,
        headed for the newest target; turning it off heads straight for it.

        Raises:
            InvalidInputError: an invalid config (nothing changes).

        """
        config.check(self.chain.n)
        self.solver.set_budget(config.ik_timeout)
        self.drift.set_posture(config.posture)
        speeds = (config.max_linear_speed, config.max_angular_speed)
        retime = speeds != (self.config.max_linear_speed, self.config.max_angular_speed)
        self.trajectory.max_linear_speed, self.trajectory.max_angular_speed = speeds
        was_smooth, self.config = self.config.smoothing, config
        self.stepper.use_accelerations(
            np.minimum(config.accelerations(self.chain.n), self.stepper.a_cap), self.at_rest())
        if retime and self.mode == Mode.TRAJECTORY:
            # The trajectory was timed for the old tip speeds: time it anew from
            # here (a speed restored after a tiny one applies at once).
            self._restart_trajectory(time)
        if self._pose_mode() != Mode.for_poses(was_smooth and self.solver.task.smooth) and \
                self.mode in (Mode.TRAJECTORY, Mode.DIRECT):
            if self._pose_mode() == Mode.TRAJECTORY:
                self._restart_trajectory(time)
                self.mode = Mode.TRAJECTORY
            else:
                self.mode = Mode.DIRECT

    def _pose_mode(self) -> Mode:
        """Return the mode of pose targets: a trajectory with smoothing (not for a look-at)."""
        return Mode.for_poses(self.config.smoothing and self.solver.task.smooth)

    def stop_then_resume(self, time: float) -> None:
        """Come to a controlled stop, then go on toward the target from where the arm stopped.

        For a clock that went back (a simulator reset): ``time`` is the last
        command's time on the new clock; the motion under way was planned on
        the old one. The joints brake to rest at the acceleration limits (every
        other limit kept), then a pose target's trajectory restarts from there;
        a twist is released (its dead-man ran on the old clock) and the next
        twist starts anew.
        """
        self.time = float(time)
        self.stop_first = True
        self.goals.forget_fallback()
        self.twists.restart_clock(float(time))
        self.feed.forget()
        if self.mode == Mode.TWIST:
            self._release()

    def set_backend(self, backend: str) -> None:
        """Take the limiting step and the local steps on ``backend`` ('auto', 'numpy', 'numba').

        The solver is apart (set_solver).

        Raises:
            InvalidInputError: an unknown backend, or 'numba' without numba.

        """
        self.backend = backend
        kernels = resolve(backend)
        self.stepper.kernels = kernels.limits
        self.goals.follow_kernels = self.drift.follow_kernels = kernels

    def set_solver(self, solver: IKSolver) -> None:
        """Use another solver for the same chain (e.g. the solver parameter changed)."""
        solver.set_budget(self.config.ik_timeout)
        self.goals.solver = solver
        self.recovery.task = self.drift.task = solver.task
        self.goals.forget_fallback()
        self.feed.forget()

    def _restart_trajectory(self, time: float) -> None:
        """Start the trajectory at rest at the current tip pose, headed for the target."""
        self.feed.forget()
        tip = self.chain.forward(self.q)
        self.trajectory.reset(tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), time)
        self.trajectory.add_key(time, self.target[:3, 3],
                                matrix_to_quaternion(self.target[:3, :3]))

    # -- output -----------------------------------------------------------------------

    def command(self, time: float, reference=None) -> Command:
        """Return the joint command at ``time`` (caller's clock, seconds).

        Args:
            time: the caller's clock, seconds. A time not after the last
                command's repeats it (no motion in no time).
            reference: (n,) joints the IK starts from (default the last
                command; with feedback, the measured joints).

        """
        dt = float(time) - self.time
        if not dt > 0.0:
            return self.command_now()
        if self.braking:
            return self._brake_to_rest(float(time))
        if self.mode == Mode.TWIST:
            self._move_twist_target(float(time))
        started = _clock()
        goal, source = self._goal(time, self.q if reference is None else reference)
        if np.all(np.abs(goal - self.q) <= ARRIVED):
            goal = self.q
        stepping = _clock()
        costs = self.costs
        costs.add('goal', stepping - started)
        guarded = costs.parts['collision']
        tip_limits = None if self.mode != Mode.TWIST else \
            (self.config.max_linear_speed, self.config.max_angular_speed)
        self.q, self.v = self.stepper.step_within_tip_speeds(
            self.q, self.v, goal, self.feed.of(goal, float(time), source), dt,
            tip_limits, self._goal_in_task)
        costs.add('limits', _clock() - stepping - (costs.parts['collision'] - guarded))
        if self.mode in (Mode.TRAJECTORY, Mode.DIRECT):
            self._watch_progress(float(time), goal, source)
        self.time = float(time)
        if self.mode == Mode.RESET and self._arrived(goal):
            self.mode = self._pose_mode()
            self._restart_trajectory(time)
        if self.teleoperating:
            self.twists.bound(self.target, self.chain.forward(self.q))
        return self.command_now()

    def _watch_progress(self, time: float, goal: FloatArray, source) -> None:
        """Sample the progress toward the target; on a stall take a route (Recovery.watch).

        A route that took the arm to the goal held ends the trajectory (its
        samples are the target from now on, the goal held for it).
        """
        blocked = self.stepper.report.blocked
        action = self.recovery.watch(self.goals, time, self.q, self.v, goal, source,
                                     self.target, self.pole,
                                     self.stepper.stopping_point(self.q, self.v), blocked,
                                     self.guard is not None)
        if action == 'done' and self.mode == Mode.TRAJECTORY:
            self.feed.forget()
            self.trajectory.reset(self.target[:3, 3], matrix_to_quaternion(self.target[:3, :3]),
                                  time)

    def _brake_to_rest(self, time: float) -> Command:
        """Brake to rest at the old limits; at rest, apply lowered ones and go on (see above)."""
        if self.mode == Mode.TWIST:
            self._move_twist_target(time)
        self.brake(time)
        if np.all(self.v == 0.0):
            self.stepper.apply_lowered()
            self.stop_first = False
            if self.mode == Mode.TRAJECTORY:
                self._restart_trajectory(time)   # from where it stopped
        return self.command_now()

    def _move_twist_target(self, time: float) -> None:
        """Integrate the held twist into the target up to ``time`` or its expiry (then release)."""
        self.target, expired = self.twists.advance(self.target, time, self.config.twist_timeout,
                                                   self.workspace)
        if expired:
            self._release()

    def check_reachability(self) -> Optional[IKResult]:
        """Ask the newest target's question (once) and let a deferred worker answer it.

        Returns ``target_result``: reachable or not and why (the worker's
        answer; None while it is awaited, or for a twist or a reset).
        """
        if self.goals.target_unchecked:
            self._ask_target()
        return self.goals.run_worker()

    def _ask_target(self) -> None:
        """Ask the worker the newest target's question from the current command."""
        aim = self.goals.solver.aim_within_reach(self.target)
        self.goals.ask_target(self.target, aim, self.q, self.pole)

    def _arrived(self, goal: FloatArray) -> bool:
        return bool(np.all(np.abs(self.q - goal) <= ARRIVED) and np.all(self.v == 0.0))

    def _goal(self, time: float, reference: FloatArray) -> Tuple[FloatArray, Optional[tuple]]:
        """Return (joint positions (n,) to head for at ``time`` in the current mode, source).

        ``source``: what moves the goal smoothly (a trajectory, a twist, the
        posture drift of a held goal: its velocity is fed forward while the
        source stays the same), or None for a goal to stop at (a reset, a
        release).
        """
        self._goal_in_task = False   # a goal in joint space (slid in joint space's metric)
        if self.mode == Mode.RESET:
            return self.q0, None
        if self.mode == Mode.TWIST and self.twists.twist is None:
            return self._stop_q, None
        if self.goals.target_unchecked:
            self._ask_target()
        goal, source = self._pose_goal(time, reference)
        if self.mode != Mode.TWIST:
            # After the pose's goal: a rest lifts when the goal held changes.
            route = self.recovery.route_goal(self.goals, time, self.target, self.pole, self.q)
            if route is not None:
                return route, None
        self._goal_in_task = True
        return goal, source

    def _pose_goal(self, time: float, reference: FloatArray) -> Tuple[FloatArray, tuple]:
        """Return (joints (n,) for the pose of the mode at ``time``, source) (_goal)."""
        if self.mode in (Mode.DIRECT, Mode.TWIST):
            pose, final = self.target, self.mode == Mode.DIRECT
        else:
            s = self.trajectory.sample(time)
            pose, final = pose_matrix(rotation9(s.quaternion), s.position), s.at_rest
            if final and max(pose_error(pose, self.target)) <= SAME_POSE:
                pose = self.target   # the end key, through a quaternion and back: the target
        dt = time - self.time
        # A target out of reach: toward a pose the arm can hold with its elbow bent.
        # Not a twist's target: it is kept near the tip (TwistState.bound), and the
        # jump of the aim as it crosses the reach broke the tip's speed limits
        # (0.7 % over, a sweep).
        aim = pose if self.mode == Mode.TWIST else self.goals.solver.aim_within_reach(pose)
        if not final:
            return self._toward_posture(self.goals.moving_goal(aim, reference, dt, self.pole),
                                        aim, dt), (self.mode,)
        held = self.goals.final_goal(pose, aim, reference, self.pole)
        if held.solved:
            held.q = self._toward_posture(held.q, aim, dt)
        return held.q, held.source((self.mode,))

    def _toward_posture(self, goal: FloatArray, pose: FloatArray, dt: float) -> FloatArray:
        """Drift a solution (n,) of ``pose`` toward the posture for dt (PostureDrift.toward)."""
        return self.drift.toward(goal, pose, dt, self.config.posture_rate, self.stepper.a_max,
                                 self.pole)
