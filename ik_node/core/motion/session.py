# SPDX-License-Identifier: Apache-2.0
"""The motion session: the one owner of a tick, from what arrives to the commands committed.

Targets, poles, twists, resets, measured joint states, configuration and
solver changes go in through its methods; :meth:`MotionSession.tick` then
makes one motion step of the whole pipeline, at a bounded cost: the clock
rule of an arm nothing measures, the feedback policy's decision (hold,
follow, re-sync), and the command stream's grid points (each one limiting
step of the tracker, with the collision guard, then the jerk stage). What is
open-ended (a full solve with its searches, the free solution, a path) is
asked of the tracker's worker (:mod:`ik_node.core.motion.worker`), paused
while a tick runs; :meth:`MotionSession.check_reachability`, called once the
tick's commands are out, lets a worker in the caller's thread answer. The
plan it commits
(:attr:`MotionSession.plan`) is what the outputs sample: a trajectory
message's horizon and tail, a position array, a joint state. Nothing else
steps the tracker.

Times are seconds on the caller's clock (the node's ROS clock, counted from
its start); joints are in chain order, rad or m; poses are 4x4 in the base
frame. No ROS here: the node is the adapter between messages and this.
"""

from dataclasses import dataclass, replace
import math
from typing import cast, Dict, Optional, Sequence, Tuple, TYPE_CHECKING

from ik_node.core.collision.guard import Blocked, CollisionGuard
from ik_node.core.collision.model import CollisionModel
from ik_node.core.collision.shapes import Shape
from ik_node.core.ik.base import IKSolver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.arrival import Arrival
from ik_node.core.motion.carry import carried_over
from ik_node.core.motion.config import TrackerConfig
from ik_node.core.motion.costs import TickCosts
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.jerk import JerkFilter
from ik_node.core.motion.stream import CLOCK_JUMP_S, CommandStream
from ik_node.core.motion.tracker import MotionTracker, TrackerStatus
from ik_node.core.poses import FloatArray
import numpy as np

if TYPE_CHECKING:   # the group tracker steps through a session too (it imports nothing of this)
    from ik_node.core.motion.group import GroupTracker

# Obstacles by name: each one or more shapes posed in the base frame.
World = Dict[str, Tuple[Shape, ...]]


@dataclass(frozen=True)
class Tick:
    """What one tick did.

    Attributes:
        planned: False when stale feedback held the plan (nothing new to send).
        added: grid points committed.
        resynced: the plan restarted from a measured state the commands do not explain.

    """

    planned: bool
    added: int = 0
    resynced: bool = False


@dataclass(frozen=True)
class CollisionSummary:
    """The collision checking of a session, for diagnostics (:meth:`MotionSession.collision`).

    Attributes:
        margin: the collision margin, m.
        obstacles: how many obstacles are in the world.
        pairs: how many pairs are checked.
        holds: how many steps the guard held (slid or braked).
        backend: the collision queries' backend ('numpy', 'numba').
        closest: (link or obstacle, link or obstacle, distance m) of the
            closest pair at the joints asked about, None without pairs.
        blocked: what holds the arm now (None: free).
        last_hold: the last hold (None: none yet).

    """

    margin: float
    obstacles: int
    pairs: int
    holds: int
    backend: str
    closest: Optional[Tuple[str, str, float]]
    blocked: Optional[Blocked]
    last_hold: Optional[Blocked]


class MotionSession:
    """The one object that owns a motion step (module docstring).

    Args:
        tracker: the motion tracker of the robot model.
        period: the tick period, s (the plan's grid step).
        lead_s: how far ahead of the clock commands are committed, s.
        jerk: one jerk limit or one per joint, > 0 (inf: none).
        budget_s: the controller's latency budget the lead covers, s.
        feedback: the feedback policy when the robot's joint states are
            followed, else None.
        own_robot: True when nothing measures the arm (the node publishes its
            joint states): a clock that jumps forward does not move it.
        stage: the jerk stage's class (ik_bench compares Ruckig's).

    """

    def __init__(self, tracker: MotionTracker, period: float, lead_s: float, jerk,
                 budget_s: float = 0.0, feedback: Optional[FeedbackPolicy] = None,
                 own_robot: bool = False, stage=JerkFilter):
        """Start at rest at the tracker's state and clock."""
        self.plan = CommandStream(tracker, period, lead_s, jerk, budget_s=budget_s, stage=stage)
        self.feedback = feedback
        self._own_robot = own_robot
        self._stage = stage
        self._last_tick: Optional[float] = None
        self._world: World = {}

    @property
    def tracker(self) -> MotionTracker:
        """Return the motion tracker: read its state; change it through the session."""
        return self.plan.tracker

    # -- what the arm is doing (read only) --------------------------------------------

    @property
    def chain(self) -> Chain:
        """The kinematic chain of the robot model in use."""
        return self.tracker.chain

    @property
    def q(self) -> FloatArray:
        """The tracker's joints (n,), chain order, rad or m: the plan's newest committed state."""
        return self.tracker.q

    @property
    def target_pose(self) -> FloatArray:
        """The 4x4 base-frame pose the tip is headed for (its pose at rest before any target)."""
        return self.tracker.target

    @property
    def has_target(self) -> bool:
        """True once a target, twist or reset came (before: holding where it started)."""
        return self.tracker.has_target

    @property
    def pole_target(self) -> Optional[FloatArray]:
        """The elbow's pole target (3,), base frame, m; None: none."""
        return self.tracker.pole

    @property
    def uses_pole(self) -> bool:
        """True when the solver aims the elbow at a pole (an SRS closed form)."""
        return self.tracker.solver.uses_pole

    def planned_tip_path(self) -> FloatArray:
        """Return the tip positions (k, 3) still ahead on the planned path, base frame, m."""
        return self.tracker.trajectory.planned_positions()

    @property
    def lead_s(self) -> float:
        """How far ahead of the clock commands are committed, s."""
        return self.plan.lead_s

    def _plan_time(self, now: float) -> float:
        """Return the plan's instant for an input that arrives at ``now``, s."""
        return now + self.lead_s

    # -- inputs ------------------------------------------------------------------------

    def target(self, now: float, pose: FloatArray) -> str:
        """Head for the 4x4 base-frame ``pose`` from the next commands on; return the mode."""
        return self.tracker.add_target(self._plan_time(now), pose)

    def target_of(self, effector: str, now: float, pose: FloatArray) -> str:
        """Head the end effector ``effector`` for ``pose`` (a GroupTracker's); return the mode."""
        group = cast('GroupTracker', self.tracker)
        return group.add_target(self._plan_time(now), pose, effector)

    def twist_of(self, effector: str, now: float, linear, angular, body: bool = False) -> None:
        """Move end effector ``effector``'s tip at a twist (a GroupTracker's; see twist)."""
        group = cast('GroupTracker', self.tracker)
        group.set_twist(self._plan_time(now), linear, angular, body, effector)

    def pole(self, pole: Optional[FloatArray]) -> None:
        """Aim the elbow at the base-frame point ``pole`` (3,), m; None: no pole."""
        self.tracker.set_pole(pole)

    def pole_of(self, effector: str, pole: Optional[FloatArray]) -> None:
        """Aim end effector ``effector``'s elbow at ``pole`` (3,), base frame, m (a group's)."""
        group = cast('GroupTracker', self.tracker)
        group.set_pole(pole, effector)

    def twist(self, now: float, linear, angular, body: bool = False) -> None:
        """Move the tip at (linear m/s, angular rad/s), base frame (tip frame when ``body``)."""
        self.tracker.set_twist(self._plan_time(now), linear, angular, body)

    def reset(self, now: float) -> None:
        """Move back to the initial positions within every limit."""
        self.tracker.reset(self._plan_time(now))

    def measured(self, names: Sequence[str], positions: Sequence[float],
                 velocities: Sequence[float], stamp: Optional[float], now: float) -> str:
        """Take a measured joint state (stamped ``stamp`` s, None: unstamped); '' or the reason.

        Without a feedback policy nothing measures the arm: ignored ('').
        """
        if self.feedback is None:
            return ''
        reason = self.feedback.take(names, positions, velocities, stamp, now)
        if not reason:
            self._place_undriven(names, positions)
        return reason

    def _place_undriven(self, names: Sequence[str], positions: Sequence[float]) -> None:
        """Move the links joints the node does not drive place to a measured state's values.

        The collision model's UndrivenLinks (another arm, a head, fingers):
        where one of their joints moved, they are placed anew, and the guard
        forgets what it knew of distances (as for an obstacle added).
        """
        guard = self.tracker.guard
        if guard is None:
            return
        model = guard.model
        if model.undriven is not None and model.undriven.take(names, positions):
            model.move_bodies(model.undriven.offsets(model.tree, self.q))

    def configure(self, now: float, config: Optional[TrackerConfig] = None, jerk=None,
                  feedback: Optional[Sequence[float]] = None) -> None:
        """Use new settings from ``now`` (s) on; None leaves a group as it is.

        Args:
            now: the clock, s.
            config: the tracker's configuration.
            jerk: one jerk limit or one per joint.
            feedback: (timeout s, resync tolerance rad, servo lag s).

        """
        if config is not None:
            self.tracker.configure(config, self._plan_time(now))
        if jerk is not None:
            self.plan.set_jerk(jerk)
        if feedback is not None and self.feedback is not None:
            self.feedback.configure(*feedback)

    def use_solver(self, solver: IKSolver) -> None:
        """Solve with ``solver`` from the next step on."""
        self.tracker.set_solver(solver)

    def use_backend(self, backend: str) -> None:
        """Run the limiting step and the collision queries on ``backend`` ('numpy', 'auto')."""
        self.tracker.set_backend(backend)
        if self.tracker.guard is not None:
            self.tracker.guard.model.set_backend(backend)

    # -- collision -------------------------------------------------------------------

    def use_collision(self, model: Optional[CollisionModel], margin: float) -> None:
        """Check every step against ``model`` with ``margin`` (m); None: no collision checks.

        The model takes the obstacles set so far (:meth:`set_obstacles`): a
        new robot model keeps the world.
        """
        if model is None:
            self.tracker.guard = None
            return
        model.set_obstacles(self._world)
        self.tracker.guard = CollisionGuard(model, margin)

    def set_margin(self, margin: float) -> None:
        """Keep ``margin`` (m) from every obstacle and between links from the next step on."""
        if self.tracker.guard is not None:
            self.tracker.guard.set_margin(margin)

    def set_obstacles(self, world: World) -> None:
        """Replace the obstacles (name -> shapes, base frame) from the next step on."""
        self._world = dict(world)
        guard = self.tracker.guard
        if guard is not None:
            guard.model.set_obstacles(self._world)
            guard.changed()

    def obstacles(self) -> World:
        """Return the obstacles the collision model holds (empty without one)."""
        guard = self.tracker.guard
        return {} if guard is None else dict(guard.model.obstacles)

    def collision(self, q: FloatArray) -> Optional[CollisionSummary]:
        """Return the collision checking's summary with the closest pair at joints q (n,), rad.

        None when collision is not checked.
        """
        guard = self.tracker.guard
        if guard is None:
            return None
        model = guard.model
        closest = None
        lowest = model.distances(np.asarray(q, dtype=np.float64), math.inf)
        if lowest.pairs.size:
            k = int(np.argmin(lowest.distance))
            a, b = model.pair_names(int(lowest.pairs[k]))
            closest = (a, b, float(lowest.distance[k]))
        report = self.tracker.stepper.report
        return CollisionSummary(guard.margin, len(model.obstacles), len(model.pairs),
                                report.holds, model.backend, closest, report.blocked,
                                report.last_hold)

    def use_chain(self, chain: Chain, solver: IKSolver, q0: FloatArray, now: float, jerk,
                  feedback: Optional[FeedbackPolicy] = None) -> None:
        """Continue with a new robot model's chain, from where the arm is (no jump).

        Raises:
            ModelError: the arm's state is outside the new model's limits
                (:func:`ik_node.core.motion.carry.carried_over`).

        """
        self.use_model(carried_over(self.tracker, chain, solver, q0, now), jerk, feedback)

    def use_model(self, tracker: MotionTracker, jerk,
                  feedback: Optional[FeedbackPolicy] = None) -> None:
        """Continue with the tracker of a new robot model.

        The same joints (carry.carried_over): the committed plan and the
        jerk stage go on, no seam at the controller. Other joints: a new plan,
        at rest at the tracker's state.
        """
        old = self.plan
        if old.tracker.joint_names == tracker.joint_names:
            old.use_tracker(tracker)
        else:
            self.plan = CommandStream(tracker, old.h, old.lead_s, jerk, budget_s=old.budget_s,
                                      stage=self._stage)
        self.feedback = feedback

    # -- the tick ----------------------------------------------------------------------

    def tick(self, now: float) -> Tick:
        """Make the motion step of the tick at ``now`` (s): commit the plan to ``now + lead_s``.

        With feedback, the policy decides what the plan starts from: held
        while the feedback is stale (nothing new committed: the controller
        plays the last message's braking tail), restarted from the measured
        state when it comes back or when the arm was disturbed.
        """
        costs = self.costs
        costs.start()
        with self.worker.pause():   # a worker thread waits at its next checkpoint
            try:
                return self._tick(now)
            finally:
                costs.end()

    def _tick(self, now: float) -> Tick:
        self._follow_clock(now)
        reference = None
        resynced = False
        if self.feedback is not None:
            resyncs = self.feedback.resyncs
            reference = self.feedback.decide(now, self.plan)
            if reference is None:
                return Tick(planned=False)
            resynced = self.feedback.resyncs > resyncs   # also one found as a hold ends
        return Tick(True, self.plan.advance(now, reference), resynced)

    @property
    def costs(self) -> TickCosts:
        """Wall-clock time per part of the last tick (ik_node.core.motion.costs)."""
        return self.tracker.costs

    @property
    def worker(self):
        """The worker answering the tick's open-ended questions (ik_node.core.motion.worker)."""
        return self.tracker.worker

    def arrival(self, now: float) -> Arrival:
        """Return the arm against its target at ``now`` (s): the command the plan holds then.

        What a controller plays at ``now`` (the tracker's own state is
        committed ``lead_s`` ahead, and the jerk stage lags it): 'arrived' only
        once that command is at the target and still.
        """
        q, v, _ = self.plan.sample(now)
        return self.tracker.arrival(q, v)

    def status(self, now: float) -> TrackerStatus:
        """Return the tracker's status snapshot with the arrival at ``now`` (for diagnostics)."""
        return replace(self.tracker.status(), arrival=self.arrival(now))

    def check_reachability(self) -> None:
        """Ask a new target's question and let a deferred or immediate worker answer it.

        Called after a tick's commands are out, so that they are not late. A
        worker thread answers by itself (its answer is taken at a tick).
        """
        self.tracker.check_reachability()

    def _follow_clock(self, now: float) -> None:
        """Own robot: a clock jump forward is not motion time; go on from the state it had.

        The arm the node simulates does not move through the gap: the plan
        restarts one period after the last tick's instant, at ``now``. (A
        clock that goes back, and a jump with a controller, are the plan's
        own rules: CommandStream.advance.)
        """
        last, self._last_tick = self._last_tick, now
        if self._own_robot and last is not None and now - last > CLOCK_JUMP_S:
            q, v, _ = self.plan.sample(last + self.plan.h)
            self.plan.restart(now, q, v)
