# SPDX-License-Identifier: Apache-2.0

"""The joint side of a tracker: the command (q, v) at its time, the one limiting step, braking.

One arm's :class:`ik_node.core.motion.tracker.MotionTracker` and several end
effectors' :class:`ik_node.core.motion.group.GroupTracker` differ in where
their goals come from; what they command is the same: joints (n,) of a
chain or of a JointUnion (rad or m), at the caller's clock (s), stepped by
one LimitingStep, braked to rest at the acceleration limits, taken from a
measured state within the limits. :class:`JointMotion` is that part, once.
"""

from typing import Optional, Tuple

from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.errors import InvalidInputError
from ik_node.core.kernels import limits
from ik_node.core.motion.config import TrackerConfig
from ik_node.core.motion.costs import TickCosts
from ik_node.core.motion.feedforward import GoalVelocity
from ik_node.core.motion.limiting import HoldReport, LimitingStep
from ik_node.core.motion.status import Command
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class JointMotion:
    """The command and its limiting step (module docstring); a tracker builds on it.

    Attributes:
        chain: the joints' owner (a Chain, or a JointUnion): names, limits.
        config: the TrackerConfig in force.
        q0: (n,) where a reset goes.
        q, v: (n,) the last command and its velocities.
        time: the last command's time, s.
        stepper: the one maker of joint commands (LimitingStep).
        feed: the goal's velocity, fed forward (GoalVelocity).
        stop_first: brake to rest before going on (the clock went back).

    """

    def _start_joints(self, chain, config: TrackerConfig, q0, time: float, velocity=None) -> None:
        """Start at rest (or at ``velocity``) at q0 (InvalidInputError: a config or q0 refused)."""
        self.chain = chain
        self.config = config.check(chain.n)
        q0 = chain.check_q(q0, 'q0')
        if not chain.within_limits(q0):
            raise InvalidInputError(f'q0: {q0.tolist()} is outside the joint limits of '
                                    f'{chain.joint_names}')
        self.q0 = q0.copy()
        self.q = q0.copy()
        self.v = np.zeros(chain.n) if velocity is None else np.array(velocity, dtype=np.float64)
        self.time = float(time)
        #: Wall-clock time per part of the current tick (MotionSession times whole ticks).
        self.costs = TickCosts()
        #: The one maker of joint commands: every limit and the margin (limiting.py).
        self.stepper = LimitingStep(chain, self.config.accelerations(chain.n), limits,
                                    self.costs)
        self.stop_first = False
        self.feed = GoalVelocity(chain.velocity)

    @property
    def guard(self) -> Optional[CollisionGuard]:
        """The collision constraint of the step (None: no geometry, nothing checked)."""
        return self.stepper.guard

    @guard.setter
    def guard(self, guard: Optional[CollisionGuard]) -> None:
        """Check every step against ``guard`` (None: none): :meth:`use_guard`."""
        self.use_guard(guard)

    def use_guard(self, guard: Optional[CollisionGuard]) -> None:
        """Check every step against ``guard`` (None: none); what held the steps starts anew."""
        self.stepper.guard = guard
        self.stepper.report = HoldReport()

    def command_now(self) -> Command:
        """Return the last command given (the initial state before any)."""
        return Command(self.q.copy(), self.v.copy(), self.time)

    def measured_state(self, q_measured, v_measured=None) -> Tuple[FloatArray, FloatArray]:
        """Return a measured state as a command can start from it: (q, v) (n,) each.

        The positions clipped into the position limits, the velocities into
        the speed limits (zero when not measured or not finite).

        Raises:
            InvalidInputError: positions of the wrong shape or not finite.

        """
        chain = self.chain
        q = np.clip(chain.check_q(q_measured, 'q_measured'), chain.lower, chain.upper)
        v = np.zeros(chain.n) if v_measured is None else np.array(v_measured, dtype=np.float64)
        if v.shape != q.shape or not np.all(np.isfinite(v)):
            v = np.zeros(chain.n)
        np.clip(v, -chain.velocity, chain.velocity, out=v)
        return q, v

    @property
    def accelerations(self) -> FloatArray:
        """The acceleration limits (n,) of the configuration (before any cap)."""
        return np.array(self.config.accelerations(self.chain.n))

    def cap_accelerations(self, cap) -> None:
        """Use at most ``cap`` (n,) as acceleration limits (a jerk stage's bound; inf: none).

        A lowered limit applies as the limiting step allows (braking).
        """
        self.stepper.a_cap = np.array(cap, dtype=np.float64)
        self.stepper.use_accelerations(np.minimum(self.accelerations, self.stepper.a_cap),
                                       self.at_rest())

    @property
    def braking(self) -> bool:
        """Return True while the joints brake to rest first (lowered limits, clock back)."""
        return self.stepper.a_next is not None or self.stop_first

    def brake(self, time: float) -> Command:
        """Step toward rest for the time elapsed, at the acceleration limits, within every limit.

        The stream's braking tail (:mod:`ik_node.core.motion.stream`): the limiting
        step with no goal. The goal's velocity is forgotten (the next command
        follows its goal from rest, not from a feed-forward that no longer holds).
        """
        dt = float(time) - self.time
        if not dt > 0.0:
            return self.command_now()
        self.q, self.v = self.stepper.braked(self.q, self.v, dt)
        self.time = float(time)
        self.feed.forget()
        return self.command_now()

    def skip_to(self, time: float) -> None:
        """Move the clock to ``time`` without motion (only at rest: the joints stay put)."""
        if np.any(self.v != 0.0):
            raise InvalidInputError('skip_to: the joints are moving; step them instead')
        self.time = max(self.time, float(time))
        self.feed.forget()

    def at_rest(self) -> bool:
        """Return True when every joint is still (v == 0)."""
        return bool(np.all(self.v == 0.0))
