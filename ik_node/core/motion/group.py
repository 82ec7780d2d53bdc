# SPDX-License-Identifier: Apache-2.0

"""The motion policy of several end effectors: their targets in, the union's joint commands out.

A :class:`GroupTracker` is the :class:`ik_node.core.motion.tracker.MotionTracker`
of a robot driven at several tips at once (two arms on a torso, a humanoid's
hands): the joints are the union of the end effectors' chains
(:class:`ik_node.core.ik.stacked.JointUnion`, shared joints once), and each
tick's goal is one stacked solve for every end effector together
(:meth:`ik_node.core.ik.stacked.StackedIK.follow`: a few LM iterations from
the current joints, the joint weights and locks applied). Per end effector:

* its target (4x4, base frame; what its task leaves free completed from the
  tip, a position pulled into its chain's reach);
* with smoothing, its own Cartesian trajectory (cubic in exp-map space, timed
  by the tip speed limits), sampled each tick; a look-at is solved directly.

The command then goes through the same limiting step as one arm's
(:class:`ik_node.core.motion.limiting.LimitingStep` over the union's limits):
joint speed and acceleration limits for the elapsed time, position limits
with braking, never NaN. It plugs into the same
:class:`ik_node.core.motion.session.MotionSession` (the command stream, the
jerk stage, feedback, re-syncs, clock rules and braking work on the union as
on one chain).

A held twist moves its end effector's target instead (teleoperation, as one
arm's: scaled to the tip speed limits, a dead-man after ``twist_timeout``,
the target leading the tip by at most half a second of the twist; the tip
speeds of every teleoperated end effector kept). An end effector's elbow pole
(a point, base frame) turns its arm's spare freedom toward it: pole steps in
the null space of every task (StackedIK.toward_poles), one on each moving
goal while the hands move, and at final targets a joint path of them,
played within every joint's limits
(:class:`ik_node.core.motion.elbows.ElbowPath`). With a
collision guard (a model of every driven link: the arms, the torso, each
other) each step keeps the margin as one arm's does, the goal slid in the
tips' metric (the hands at their targets keep their arms' joints). While the
guard holds the steps, the local steps move neither the shared joints nor
the arms of the hands at their targets; a stall against what holds them
brings the arm to rest, and the worker is asked for a free solution and a
joint path to it (:class:`ik_node.core.motion.group_route.GroupRecovery`).
Where the local steps stall short of final targets (a local minimum of
the summed error), the worker is asked for one full stacked solve (a
StallQuestion, in the node's worker thread: not in the tick); the arm goes
to its joints when they meet every task. Targets that cannot all be met
leave the goal at the current joints: the arm rests there, and each end
effector's verdict says how far it is.

Times are the caller's clock, s; joints (N,) in union order, rad or m.
"""

from dataclasses import dataclass
import time as _time
from typing import Any, List, Optional, Tuple

from ik_node.core.errors import InvalidInputError
from ik_node.core.ik.stacked import EndEffector, StackedIK
from ik_node.core.kernels.backend import resolve
from ik_node.core.model.chain import Chain
from ik_node.core.motion.config import TrackerConfig
from ik_node.core.motion.elbows import ElbowPath
from ik_node.core.motion.group_route import GroupRecovery, near_and_own, StallAnswer, \
    StallQuestion
from ik_node.core.motion.joints import JointMotion
from ik_node.core.motion.mode import Mode
from ik_node.core.motion.status import Command
from ik_node.core.motion.teleop import TwistInput
from ik_node.core.motion.trajectory import CartesianTrajectory
from ik_node.core.motion.worker import ImmediateWorker
from ik_node.core.motion.workspace import WorkspaceSphere
from ik_node.core.poses import pose_matrix, rotation9
from ik_node.core.rotations import matrix_to_quaternion
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
_clock = _time.perf_counter

# Stacked LM iterations per motion step: enough that a goal keeps up with a
# trajectory's sample, few enough that a tick's cost is bounded (each is one
# stacked step of every end effector's rows).
FOLLOW_ITERATIONS = 3
# An end effector this near its target (m, rad) keeps its arm's joints where a slid goal
# has them (_still_joints).
STILL_M, STILL_RAD = 1e-3, 0.01
# A goal this close to the current command in every joint is the command (tracker.ARRIVED).
ARRIVED = 1e-12
# Local steps that move no joint more than this (rad, m) toward final targets have stalled.
STALLED = 1e-9
# The source of a goal turned toward the poles (fed forward as the step to it).
POLES = 'poles'
# Pole steps made ahead of the elbows' playback per tick, each at most WAYPOINT_STEP
# (m) of elbow and WAYPOINT_JOINT_STEP (rad, m) of any joint's motion: the chord
# between two waypoints leaves the hands' targets by ~ |dq|^2 L / 8 (12 µm on a 1 m arm).
WAYPOINTS_PER_TICK = 2
# After the first waypoint of a tick, another is made only within this much of it, s
# (one costs ~0.6 ms per arm, compiled).
WAYPOINT_BUDGET_S = 0.001
WAYPOINT_STEP = 0.005
WAYPOINT_JOINT_STEP = 0.01
# A pole step on a moving goal grows per tick by at most this share of each joint's
# acceleration limit: its joints' speed ramps up (at once, the hands lagged their way by
# 12 mm more; at 0.25 by up to 2 cm more in 36 moves of three robots, at 0.1 by 4.7 mm).
POLE_RAMP = 0.1
# A pole step that moves every elbow less than this (m) ends the way: its joints'
# motion is then mostly the tasks' corrections, not a way to go.
WAYPOINT_LEAST = 1e-4


@dataclass(frozen=True)
class EffectorArrival:
    """One end effector against its target (what the arm does, not what a solver says).

    Attributes:
        name: the end effector.
        state: 'holding' (no target yet), 'moving', 'arrived' (the joints rest
            with its task met), 'blocked' (the joints rest, its task not met,
            held by the collision margin) or 'unreachable' (the joints rest,
            its task not met: out of reach, or in conflict with another end
            effector's).
        position_error: of its task, m (0 for a task without a position).
        orientation_error: of its task, rad (an axis' angle; 0 for a position).
        reason: why it is 'blocked' or 'unreachable', one line for people
            ('' otherwise).

    """

    name: str
    state: str
    position_error: float
    orientation_error: float
    reason: str = ''


@dataclass(frozen=True)
class GroupArrival:
    """Every end effector against its target (:meth:`GroupTracker.arrival`).

    Attributes:
        state: 'moving' while any joint moves or an elbow turns to its pole; else
            'arrived' when every end effector with a target arrived, 'unreachable'
            when one did not, 'holding' before any target.
        effectors: one EffectorArrival per end effector, in their order.

    """

    state: str
    effectors: Tuple[EffectorArrival, ...]


@dataclass(frozen=True)
class GroupStatus:
    """A snapshot of a GroupTracker, for diagnostics.

    Attributes:
        mode: 'trajectory', 'direct' or 'reset'.
        tasks: per end effector (name, task name).
        backend: the stacked solver's backend.
        shared: joints of more than one chain (a torso).
        arrival: the arm against its targets (a session fills in the command played now).

    """

    mode: str
    tasks: Tuple[Tuple[str, str], ...]
    backend: str
    shared: Tuple[str, ...]
    arrival: Optional[GroupArrival] = None


class _Lane:
    """One end effector's target and trajectory (GroupTracker's)."""

    def __init__(self, effector: EndEffector, columns: FloatArray, tip: FloatArray,
                 time: float, config: TrackerConfig):
        self.effector = effector
        self.columns = columns
        self.workspace = WorkspaceSphere(effector.chain.reach_bound())
        self.target = tip
        self.asked = tip   # the target as asked (``target``: pulled into the reach)
        self.has_target = False
        self.pole: Optional[FloatArray] = None   # its elbow's pole point (3,), base frame
        self.twists = TwistInput()   # a held twist moves ``target`` (teleoperation)
        self.trajectory = CartesianTrajectory(
            tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), time,
            max_linear_speed=config.max_linear_speed,
            max_angular_speed=config.max_angular_speed)

    @property
    def name(self) -> str:
        return self.effector.name

    @property
    def chain(self) -> Chain:
        return self.effector.chain

    def tip(self, q: FloatArray) -> FloatArray:
        """Return its tip pose (4, 4) at union joints q (N,)."""
        return self.chain.forward(q[self.columns])

    def restart(self, q: FloatArray, time: float) -> None:
        """Start its trajectory at rest at the tip pose at q, headed for its target."""
        tip = self.tip(q)
        self.trajectory.reset(tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), time)
        self.trajectory.add_key(time, self.target[:3, 3],
                                matrix_to_quaternion(self.target[:3, :3]))

    @property
    def teleoperated(self) -> bool:
        """Return True while a twist is held for this end effector."""
        return self.twists.twist is not None

    def sample(self, time: float, smooth: bool) -> Tuple[FloatArray, bool]:
        """Return (the pose (4, 4) to head for at ``time``, True when it is the final one)."""
        if self.teleoperated:
            return self.target, False
        if not (smooth and self.effector.task.smooth):
            return self.target, True
        s = self.trajectory.sample(time)
        if s.at_rest:
            return self.target, True
        return pose_matrix(rotation9(s.quaternion), s.position), False


class GroupTracker(JointMotion):
    """Several end effectors' targets in, the union's joint commands out (module docstring).

    Args:
        solver: the StackedIK of the end effectors (their chains, tasks, joint
            weights and locks).
        config: a TrackerConfig (checked here; a posture is not used).
        q0: (N,) initial joints, union order, within the limits; also where
            :meth:`reset` goes.
        time: the caller's clock now, s.
        velocity: (N,) initial velocities (default at rest).
        backend: 'auto', 'numpy' or 'numba' for the limiting step.
        worker: answers the recovery's questions (a free solution and a path
            when the margin holds the arm; default: ImmediateWorker, in the
            caller's thread).

    Raises:
        InvalidInputError: an invalid config, or q0 not finite / not within the limits.

    """

    def __init__(self, solver: StackedIK, config: TrackerConfig, q0, time: float,
                 velocity=None, backend: str = 'auto', worker=None):
        """Start at rest (or at ``velocity``) at q0, each end effector holding its tip pose."""
        union = solver.union
        self.solver = solver
        # The joints' limits as a chain's (the stream, the feedback): the union's.
        self._start_joints(union, config, q0, time, velocity)
        q0 = self.q0
        # Asked the recovery's and the stall's questions (each answers itself: answer_with).
        self.worker: Any = ImmediateWorker() if worker is None else worker
        self.lanes = [_Lane(e, cols, e.chain.forward(q0[cols]), self.time, self.config)
                      for e, cols in zip(solver.effectors, union.columns)]
        self.mode = self._pose_mode()
        self._has_target = False
        # A full stacked solve's joints for final targets the local steps stall short
        # of (asked of the worker once per set of targets), else None.
        self._held: Optional[FloatArray] = None
        self._asked = False
        # The worker's answers polled and not yet taken, by their type (answer_of).
        self._answers: dict = {}
        # True from a StallQuestion asked till its answer is taken (or a new key).
        self._solving = False
        # The elbows' way to their poles at final targets (_along_elbow_path), else None.
        self._elbow_path: Optional[ElbowPath] = None
        self._elbow_velocity = np.zeros(union.n)
        # The last tick's pole step on a moving goal (_turned_on_the_way), None: none.
        self._pole_way: Optional[FloatArray] = None
        #: Rest, a free goal and a path when the margin holds the arm (group_route).
        self.recovery = GroupRecovery()
        self.stepper.tip_jacobian = lambda x: self.solver.tip_jacobians(x)
        self.stepper.still = self._still_joints
        self.set_backend(backend)

    # -- state ------------------------------------------------------------------------

    @property
    def joint_names(self) -> List[str]:
        """Joint names, union order."""
        return self.chain.names

    @property
    def names(self) -> List[str]:
        """The end effectors' names, in their order."""
        return [lane.name for lane in self.lanes]

    @property
    def has_target(self) -> bool:
        """Return True once a target or a reset came."""
        return self._has_target

    @property
    def targets(self) -> List[FloatArray]:
        """Each end effector's target (4, 4), base frame (its tip pose before a target)."""
        return [lane.target for lane in self.lanes]

    @property
    def target(self) -> FloatArray:
        """Return the pose (4, 4) the first end effector heads for (MotionTracker has one)."""
        return self.lanes[0].target

    @property
    def pole(self) -> Optional[FloatArray]:
        """Return the first end effector's pole point (3,), base frame, m, or None.

        As MotionTracker.pole (a session's pole_target).
        """
        return self.lanes[0].pole

    @property
    def poles(self) -> List[Optional[FloatArray]]:
        """Each end effector's elbow pole (3,), base frame, m, or None."""
        return [lane.pole for lane in self.lanes]

    def lane_index(self, name: str) -> int:
        """Return the index of end effector ``name`` (InvalidInputError: not one of them)."""
        for k, lane in enumerate(self.lanes):
            if lane.name == name:
                return k
        raise InvalidInputError(f'end effector {name!r}: not one of {self.names}')

    def status(self) -> GroupStatus:
        """Return a snapshot of the mode and the tasks (a session adds the arrival)."""
        return GroupStatus(str(self.mode), tuple((lane.name, lane.effector.task.name)
                                                 for lane in self.lanes),
                           self.solver.backend, tuple(self.chain.shared()), self.arrival())

    def arrival(self, q: Optional[FloatArray] = None,
                v: Optional[FloatArray] = None) -> GroupArrival:
        """Return every end effector against its target at (q, v) (N,) (default: the command)."""
        q = self.q if q is None else np.asarray(q, dtype=np.float64)
        v = self.v if v is None else np.asarray(v, dtype=np.float64)
        turning = self._on_a_way() or self._stall_solving() or self._toward_held()
        still = bool(np.all(v == 0.0)) and self.mode != Mode.RESET and not turning and \
            not any(lane.sample(self.time, self.mode == Mode.TRAJECTORY)[1] is False
                    for lane in self.lanes)
        asked = [lane.asked for lane in self.lanes]
        blocked = 'blocked' if self.stepper.report.blocked is not None or \
            self.recovery.resting else ''
        errors = self.solver.errors(asked, q)
        met = self.solver.met(asked, q)
        out = []
        for lane, (pos, rot), ok in zip(self.lanes, errors, met):
            if not lane.has_target:
                state = 'holding'
            elif not still:
                state = 'moving'
            else:
                state = 'arrived' if ok else blocked or 'unreachable'
            out.append(EffectorArrival(lane.name, state, float(pos), float(rot),
                                       self._reason(state, float(pos), float(rot))))
        states = [e.state for e in out]
        if not still and self._has_target:
            overall = 'moving'
        elif 'blocked' in states:
            overall = 'blocked'
        elif 'unreachable' in states:
            overall = 'unreachable'
        elif 'arrived' in states:
            overall = 'arrived'
        else:
            overall = 'holding'
        return GroupArrival(overall, tuple(out))

    def _reason(self, state: str, position_error: float, orientation_error: float) -> str:
        """Return why an end effector is 'blocked' or 'unreachable' (one line), else ''."""
        if state not in ('blocked', 'unreachable'):
            return ''
        off = f'{position_error:.3g} m and {orientation_error:.3g} rad from its target'
        if state == 'unreachable':
            return f"{off}: out of reach, or in conflict with another end effector's task"
        held = self.stepper.report.blocked
        if self.recovery.no_path:
            why = self.recovery.no_path
        elif held is not None:
            why = (f'held by the collision margin: {held.pair[0]} and {held.pair[1]} '
                   f'{1e3 * held.distance:.1f} mm apart')
        else:
            why = 'held by the collision margin'
        return f'{off}: {why}'

    def idle(self) -> bool:
        """Return True at rest and on no way (an elbow path, a route) that may rest midway.

        The elbows' path rests where its playback catches up with the last
        waypoint made; a backend switch there changed solvers in the middle
        of a turn (a node switching to numba then: the hands 0.28 mm off).
        """
        return self.at_rest() and not self._on_a_way()

    def _on_a_way(self) -> bool:
        """Return True while an elbow turns along its path, or a route is followed."""
        return (self._elbow_path is not None and not self._elbow_path.finished) or \
            self.recovery.route is not None

    # -- inputs -----------------------------------------------------------------------

    def add_target(self, time: float, target: FloatArray, effector: Optional[str] = None) -> str:
        """Take a new target pose (4, 4), base frame, valid, for ``effector`` (default the first).

        Returns:
            'accepted', 'retimed' or 'duplicate' (its trajectory's verdict).

        Raises:
            InvalidInputError: an unknown end effector (nothing changes).

        """
        lane = self.lanes[0 if effector is None else self.lane_index(effector)]
        if lane.teleoperated:   # a pose ends its teleoperation, from where its tip is
            lane.twists.twist = None
            lane.restart(self.q, time)
        task = lane.effector.task
        target = task.complete(np.array(target, dtype=np.float64), lane.tip(self.q))
        lane.asked = target.copy()
        if task.uses_position:
            target = lane.workspace(target)
        lane.target = target
        lane.has_target = self._has_target = True
        self._forget_held()
        if self.mode == Mode.RESET:
            self._restart_all(time)
            self.mode = self._pose_mode()
        if self.mode == Mode.DIRECT or not task.smooth:
            return 'accepted'
        return lane.trajectory.add_key(time, target[:3, 3], matrix_to_quaternion(target[:3, :3]))

    def set_pole(self, pole, effector: Optional[str] = None) -> None:
        """Set (or clear, None) end effector ``effector``'s elbow pole (3,), base frame, m.

        Its elbow turns toward the point as far as every task leaves it free
        (default the first end effector).

        Raises:
            InvalidInputError: an unknown end effector, or not a finite point (nothing changes).

        """
        lane = self.lanes[0 if effector is None else self.lane_index(effector)]
        if pole is not None:
            pole = np.array(pole, dtype=np.float64)
            if pole.shape != (3,) or not np.all(np.isfinite(pole)):
                raise InvalidInputError(f'{lane.name}/pole_target: expected a finite point (3,), '
                                        f'received {pole!r}')
        lane.pole = pole
        self._forget_held()

    def set_twist(self, time: float, linear, angular, body: bool = False,
                  effector: Optional[str] = None) -> None:
        """Teleoperate end effector ``effector`` (default the first) with a twist.

        As MotionTracker.set_twist, per end effector: (3,) m/s of its tip
        origin and (3,) rad/s, in the base frame (``body``: its tip frame),
        scaled down as a whole to the tip speed limits, held until the next
        one or ``twist_timeout`` (then, or for a zero twist, released: that
        end effector heads for where braking stops it). The others keep
        their targets.

        Raises:
            InvalidInputError: an unknown end effector, or its task is a look-at.

        """
        lane = self.lanes[0 if effector is None else self.lane_index(effector)]
        if not lane.effector.task.smooth:
            raise InvalidInputError(f'{lane.name}/target_twist: a twist moves the tip, and the '
                                    'look_at task aims the tool at a point: send target points')
        lin, ang = lane.twists.within_tip_limits(
            np.array(linear, dtype=np.float64), np.array(angular, dtype=np.float64),
            self.config.max_linear_speed, self.config.max_angular_speed)
        if self.mode == Mode.RESET:
            self.mode = self._pose_mode()
            self._restart_all(time)
        self._forget_held()
        lane.has_target = self._has_target = True
        if not lane.teleoperated:
            lane.target = lane.asked = lane.tip(self.q)
            lane.twists.restart_clock(float(time))
        else:
            self._move_twist_target(lane, float(time))
        if not lane.twists.hold(float(time), lin, ang, body):
            self._release(lane, float(time))

    def set_solver(self, solver) -> None:
        """Refuse another solver (InvalidInputError): the stacked solve is the only one."""
        raise InvalidInputError('solver: several end effectors are solved by the stacked '
                                'Jacobian only')

    def check_reachability(self) -> None:
        """Nothing to ask: each tick's stacked step is bounded and the verdict is the arm's."""
        return None

    def sync(self, time: float, q_measured, v_measured=None) -> None:
        """Continue from the measured joint state (clipped into the limits), trajectories anew."""
        self.q, self.v = self.measured_state(q_measured, v_measured)
        self.time = float(time)
        self.feed.forget()
        self._forget_held()
        for lane in self.lanes:
            if not lane.has_target:
                lane.target = lane.asked = lane.tip(self.q)
        if self.mode == Mode.TRAJECTORY:
            self._restart_all(time)
        for lane in self.lanes:
            if lane.teleoperated:
                self._release(lane, float(time))

    def reset(self, time: float) -> None:
        """Go back to the initial joint positions, in joint space, within the limits."""
        self.mode = Mode.RESET
        self._has_target = True
        self._forget_held()
        for lane in self.lanes:
            lane.twists.twist = None
            lane.target = lane.asked = lane.tip(self.q0)
            lane.has_target = True

    def configure(self, config: TrackerConfig, time: float) -> None:
        """Apply new settings without a jump (as MotionTracker.configure)."""
        config.check(self.chain.n)
        speeds = (config.max_linear_speed, config.max_angular_speed)
        retime = speeds != (self.config.max_linear_speed, self.config.max_angular_speed)
        smooth_before = self.config.smoothing
        for lane in self.lanes:
            lane.trajectory.max_linear_speed, lane.trajectory.max_angular_speed = speeds
        self.config = config
        self.stepper.use_accelerations(
            np.minimum(config.accelerations(self.chain.n), self.stepper.a_cap), self.at_rest())
        if self.mode == Mode.RESET:
            return
        self.mode = self._pose_mode()
        if retime or (self.mode == Mode.TRAJECTORY and not smooth_before):
            self._restart_all(time)

    def _pose_mode(self) -> Mode:
        return Mode.for_poses(self.config.smoothing)

    def _move_twist_target(self, lane: _Lane, time: float) -> None:
        """Integrate a lane's held twist into its target up to ``time`` (expired: released)."""
        lane.target, expired = lane.twists.advance(lane.target, time, self.config.twist_timeout,
                                                   lane.workspace)
        lane.asked = lane.target
        if expired:
            self._release(lane, time)

    def _release(self, lane: _Lane, time: float) -> None:
        """Stop a lane's teleoperation: head for where braking at the limits stops its tip."""
        lane.twists.twist = None
        stop = self.stepper.stopping_point(self.q, self.v)
        lane.target = lane.asked = lane.tip(stop)
        self._forget_held()
        tip = lane.tip(self.q)
        lane.trajectory.reset(tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), time)
        lane.trajectory.add_key(time, lane.target[:3, 3],
                                matrix_to_quaternion(lane.target[:3, :3]))

    def _fixed_while_held(self, q: FloatArray) -> Optional[BoolArray]:
        """Return (N,) bool, the joints a local step keeps while the guard holds them, or None.

        While a step was held (slid or braked) lately: the shared joints (a
        torso) and the arms of the hands at their targets (_still_joints).
        The held hand slides by its own arm; the torso, with the other arm
        turning against it to keep its hand, moved that hand up to 6 cm (the
        two joint groups do not keep pace under the limits). When the hand
        stalls, the recovery (group_route) may move the torso on a planned
        path with the other hand kept on its target.
        """
        if self.stepper.report.blocked is None or self.guard is None:
            return None
        still = self._still_joints(q)
        return self.solver.shared_joints | (False if still is None else still)

    def _still_joints(self, q: FloatArray) -> Optional[BoolArray]:
        """Return (N,) bool, the joints a slid goal keeps (LimitingStep.still), or None.

        Along a route, the joints it keeps; else the own joints (not shared)
        of the end effectors within STILL_M and STILL_RAD of their targets at
        q: a hand that holds is not moved to let another slide along a box
        (in the tips' metric alone, a slide turned the torso with the holding
        arm's joints against it, and that hand drifted 6 cm over 3 s).
        """
        route = self.recovery.still_joints()
        if route is not None:
            return route
        return near_and_own(self.solver, self.targets, q, near_ones=True,
                            within=(STILL_M, STILL_RAD))[1]

    def active_poles(self) -> Optional[List[Optional[FloatArray]]]:
        """Return each end effector's pole (None each without), or None when none has one."""
        poles = self.poles
        return poles if any(p is not None for p in poles) else None

    def _forget_held(self) -> None:
        """Let the local steps lead again (new targets, a new state): a full solve may be asked.

        A route is dropped, and a question under way will not be taken (a new key).
        """
        self._held, self._asked, self._elbow_path, self._solving = None, False, None, False
        self.recovery.forget()

    def _restart_all(self, time: float) -> None:
        self.feed.forget()
        for lane in self.lanes:
            lane.restart(self.q, time)

    def stop_then_resume(self, time: float) -> None:
        """Come to a controlled stop, then go on toward the targets (a clock that went back)."""
        self.time = float(time)
        self.stop_first = True
        self.feed.forget()
        for lane in self.lanes:   # a twist's dead-man ran on the old clock
            lane.twists.restart_clock(float(time))
            if lane.teleoperated:
                self._release(lane, float(time))

    def set_backend(self, backend: str) -> None:
        """Take the limiting step on ``backend`` ('auto', 'numpy', 'numba')."""
        self.backend = backend
        self.stepper.kernels = resolve(backend).limits

    # -- output -----------------------------------------------------------------------

    def command(self, time: float, reference=None) -> Command:
        """Return the joint command at ``time`` (as MotionTracker.command).

        Args:
            time: the caller's clock, s (not after the last command: repeated).
            reference: (N,) joints the stacked step starts from (default the
                last command; with feedback, the measured joints).

        """
        dt = float(time) - self.time
        if not dt > 0.0:
            return self.command_now()
        if self.braking:
            return self._brake_to_rest(float(time))
        teleoperated = [lane for lane in self.lanes if lane.teleoperated]
        for lane in teleoperated:
            self._move_twist_target(lane, float(time))
        teleoperated = [lane for lane in teleoperated if lane.teleoperated]
        started = _clock()
        goal, source = self._goal(float(time), self.q if reference is None else reference, dt)
        if np.all(np.abs(goal - self.q) <= ARRIVED):
            goal = self.q
        stepping = _clock()
        self.costs.add('goal', stepping - started)
        tips = None if not teleoperated else \
            (lambda x: [lane.tip(x) for lane in teleoperated])
        goal_v = self.feed.of(goal, float(time), source)
        if source == (self.mode, POLES):   # the elbows' path's own velocity
            goal_v = self._elbow_velocity
        # Slid in the tips' metric (LimitingStep.task_metric): a hand that holds is not
        # moved by a slide (a route's in joint space's moved the torso, and the other
        # hand 4 cm); a reset's in joint space's.
        in_task = self.mode != Mode.RESET
        self.q, self.v = self.stepper.step_within_tip_speeds(
            self.q, self.v, goal, goal_v, dt,
            None if tips is None else (self.config.max_linear_speed,
                                       self.config.max_angular_speed), in_task=in_task,
            tips=tips)
        self.costs.add('limits', _clock() - stepping)
        for lane in teleoperated:   # the target leads the tip by at most the twist's lead
            lane.twists.bound(lane.target, lane.tip(self.q))
            lane.asked = lane.target
        self.time = float(time)
        if self.mode == Mode.RESET and np.all(np.abs(self.q - goal) <= ARRIVED) and \
                self.at_rest():
            self.mode = self._pose_mode()
            self._restart_all(time)
        return self.command_now()

    def _goal(self, time: float, reference: FloatArray,
              dt: float) -> Tuple[FloatArray, Optional[tuple]]:
        """Return (joints (N,) to head for at ``time``, the source that moves them or None).

        ``dt`` (s) is the motion step's (the elbows' path is played over it).
        """
        last_pole_way, self._pole_way = self._pole_way, None
        if self.mode == Mode.RESET:
            return self.q0, None
        smooth = self.mode == Mode.TRAJECTORY
        poses, final = [], True
        for lane in self.lanes:
            pose, done = lane.sample(time, smooth)
            poses.append(pose)
            final = final and done
        if final and self.guard is not None:
            routed = self.recovery.goal(self, poses, time)
            if routed is not None:
                return routed, None
        if final and self._held is not None:
            return self._held, None
        start = np.clip(np.asarray(reference, dtype=np.float64), self.chain.lower,
                        self.chain.upper)
        poles = self.active_poles()
        if poles is not None and final:
            return self._along_elbow_path(poses, start, poles, dt)
        fixed = self._fixed_while_held(start)
        goal = self.solver.follow(poses, start, FOLLOW_ITERATIONS, timed=True, fixed=fixed)
        if final:
            return self._unstalled(poses, start, goal), None
        if poles is not None and fixed is None:
            goal = self._turned_on_the_way(poses, start, goal, poles, dt, last_pole_way)
        return goal, (self.mode,)

    def _turned_on_the_way(self, poses: List[FloatArray], start: FloatArray, goal: FloatArray,
                           poles: List[Optional[FloatArray]], dt: float,
                           last: Optional[FloatArray]) -> FloatArray:
        """Return the moving goal (N,) with one pole step on it: the elbows turn on the way.

        As one arm's moving goal takes its pole's swivel: while the hands move
        (a trajectory's samples, a twist), each tick's goal (the tasks' steps
        toward the samples ``poses``) takes one pole step in the tasks' null
        space (StackedIK.toward_poles; each arm's own joints), at most
        WAYPOINT_STEP of elbow and, per joint, the least of
        WAYPOINT_JOINT_STEP, half the speed the tasks' step from ``start``
        leaves it over ``dt`` (s), and ``last`` tick's pole step (N,) grown by
        POLE_RAMP of its acceleration limit (None: from 0); one length per
        arm, checked once (``quick``: its cost is one correction of the tasks
        per arm). The elbows are then near their poles when the hands arrive,
        and the way at final targets is short.
        """
        room = self.chain.velocity * dt - np.abs(goal - start)
        ramp = POLE_RAMP * self.stepper.a_max * dt * dt
        if last is not None:
            ramp = ramp + np.abs(last)
        joint_step = np.clip(np.minimum(0.5 * room, ramp), 1e-12, WAYPOINT_JOINT_STEP)
        turned = self.solver.toward_poles(poses, goal, poles, WAYPOINT_STEP, timed=True,
                                          joint_step=joint_step, quick=True)
        self._pole_way = turned - goal
        return turned

    def _along_elbow_path(self, poses: List[FloatArray], start: FloatArray,
                          poles: List[Optional[FloatArray]],
                          dt: float) -> Tuple[FloatArray, Optional[tuple]]:
        """Return (the goal on the elbows' way to their poles, its source) (_goal's).

        At final targets with poles, once the tasks' steps from ``start`` meet
        every task (the hands first: till then the goal is theirs), the elbows
        go their way as an :class:`ElbowPath`: up to WAYPOINTS_PER_TICK pole
        steps are made ahead each tick (the second within WAYPOINT_BUDGET_S;
        each at most WAYPOINT_STEP of elbow and WAYPOINT_JOINT_STEP of joint
        motion), and the path is played within the joints' limits; at its end
        the goal rests there.
        """
        path = self._elbow_path
        if path is None:
            first = self.solver.follow(poses, start, FOLLOW_ITERATIONS, timed=True)
            if not all(self.solver.met(poses, first)):   # the hands first
                return self._unstalled(poses, start, first), None
            path = self._elbow_path = ElbowPath(first, self.chain.velocity,
                                                self.stepper.a_max,
                                                self.config.max_linear_speed)
        began = _clock()
        for k in range(WAYPOINTS_PER_TICK):
            if path.done or (k > 0 and _clock() - began > WAYPOINT_BUDGET_S):
                break
            ahead = self.solver.toward_poles(poses, path.last, poles, WAYPOINT_STEP, timed=True,
                                             joint_step=WAYPOINT_JOINT_STEP)
            moved = self._elbows_moved(path.last, ahead)
            if ahead is path.last or not moved > WAYPOINT_LEAST:
                path.finish()
                break
            path.extend(ahead, moved, dt)
        point, self._elbow_velocity = path.advance(dt)
        if path.finished:
            return path.last, None
        return point, (self.mode, POLES)

    def _elbows_moved(self, before: FloatArray, after: FloatArray) -> float:
        """Return the farthest any elbow moves from joints ``before`` to ``after`` (N,), m."""
        moved = 0.0
        for a, b in zip(self.solver.elbow_points(before), self.solver.elbow_points(after)):
            if a is not None and b is not None:
                moved = max(moved, float(np.linalg.norm(b - a)))
        return moved

    def _unstalled(self, poses: List[FloatArray], start: FloatArray,
                   goal: FloatArray) -> FloatArray:
        """Return the goal for final targets: past a stall of the local steps, a full solve's.

        Where the local steps stall short of the final targets (a local
        minimum of the summed error), the worker is asked one full stacked
        solve (a StallQuestion: restarts, within the solver's budget; in the
        node's worker thread, not in the tick), once per set of targets and
        only while it has no other question; when its answer meets every task
        the arm goes to its joints in joint space. Till then, and without
        one, the stall stands: the targets cannot all be met from here (each
        end effector's verdict says by how much).
        """
        key = ('stall', self.recovery.revision)
        if not self._asked and np.max(np.abs(goal - start)) <= STALLED and \
                not all(self.solver.met(poses, goal)) and not self.worker.busy:
            self._asked = self._solving = True
            self.worker.ask(StallQuestion(key, tuple(poses), start.copy(), self.active_poles(),
                                          self.solver))
        answer = self.answer_of(StallAnswer) if self._solving else None
        if answer is None or answer.key != key:
            return goal
        self._solving = False
        if answer.q is None:
            return goal
        self._held = answer.q
        return answer.q

    def _toward_held(self) -> bool:
        """Return True while the command moves toward a stall's solution.

        The arm (the plan, behind the command) may still rest when the
        command sets off: it is on its way, not resting short of its targets.
        A command held at rest (the margin) is not.
        """
        return self._held is not None and bool(np.any(self.v != 0.0))

    def _stall_solving(self) -> bool:
        """Return True while a stall's solve is under way or its answer waits (not at rest).

        A question the recovery's replaced in the worker is not under way.
        """
        if not self._solving:
            return False
        self._collect_answer()
        return self.worker.busy or StallAnswer in self._answers

    def answer_of(self, kind: type):
        """Return the worker's newest answer of type ``kind`` not yet taken, or None.

        The recovery's questions and the stall's share the tracker's worker:
        each takes only its own kind of answer.
        """
        self._collect_answer()
        return self._answers.pop(kind, None)

    def _collect_answer(self) -> None:
        """Keep the worker's newest answer, if one came, under its type (answer_of)."""
        answer = self.worker.poll()
        if answer is not None:
            self._answers[type(answer)] = answer

    def _brake_to_rest(self, time: float) -> Command:
        self.brake(time)
        if self.at_rest():
            self.stepper.apply_lowered()
            self.stop_first = False
            if self.mode == Mode.TRAJECTORY:
                self._restart_all(time)
        return self.command_now()
