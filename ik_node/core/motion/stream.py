# SPDX-License-Identifier: Apache-2.0

"""The command stream: the tracker's commands on a fixed grid, committed ahead of time.

A controller that interpolates (joint_trajectory_controller) must never build
a spline of its own between the node's messages: one that starts from the
measured state (velocity 0 on mock hardware) at the tick that reads a
message gives stop-and-go. So every command is planned on a fixed grid of
period h (the node's period) ``lead_s`` ahead of the clock and **committed**:
a grid instant's state (positions, velocities, accelerations) never changes
once planned, and every message that holds it holds the same values. The
limiting step (:meth:`MotionTracker.command`) runs once per grid instant, then
the jerk stage (:class:`ik_node.core.motion.jerk.JerkFilter`): between two grid
instants the command is exactly one cubic, which the controller's quintic
through both ends reproduces.

:meth:`horizon` is what a message carries: the newest committed point at or
before ``now - budget_s`` (so the controller, reading it up to ``lead_s``
later, or on a clock up to the budget behind the node's, samples inside the
message, never from its own start state), every committed point after it,
then a **braking tail**: the limiting step with no goal, through the
same jerk stage, to rest within every limit. A controller that hears nothing
more (the node stopped, a stall) plays the tail: a smooth stop.

A tick that comes late (the clock passed the previous message's committed end
minus the latency budget and half a period: the controller may be on that
tail already) commits the tail itself up to the new end, counted in
``tails_adopted``: the arm brakes and then picks up again, without a jump.
A tick that finds more than ``lead_s + CATCH_UP_S`` of the grid to commit (the
node stalled, or each of its ticks cost more than the time between them) has
the arm brake over all of it but the newest ``CATCH_UP_S``, also counted in
``tails_adopted``: braking steps are cheap and never refused, so a tick's work
stays bounded however late it is.
A plan at rest skips idle time in one step (no points for nothing).

Times are the caller's clock in seconds (the node: ROS time since its start).
"""

import bisect
import collections
from dataclasses import dataclass, replace
import math
import time as _time
from typing import Deque, List, Optional, Tuple

from ik_node.core.errors import InvalidInputError
from ik_node.core.motion.jerk import check_jerk_limits, JerkFilter, smoothing_steps
from ik_node.core.motion.limiting import LimitingStep
from ik_node.core.motion.tracker import MotionTracker
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
_clock = _time.perf_counter

# A tick is late when its message may reach the controller less than this
# fraction of a period before the previous message's committed end.
LATE_MARGIN = 0.5
# Periods committed ahead beyond the latency budget when a controller reads the
# commands: one for the tick spacing, two for a tick that comes late (a loaded
# machine; under use_sim_time the node sees the simulator's clock in its steps
# and may skip one: 16 ms gaps between 100 Hz ticks on a 4 ms /clock were
# common, and with one period of slack every other tick braked).
CONTROLLER_LEAD_PERIODS = 3.0

# The most grid time (s) beyond the lead that one tick plans as motion; a later
# tick brakes over the rest (see advance). Without a bound the work of a late
# tick grew with its lateness: the iiwa14 held at the floor costs ~2.5 ms per
# grid point (three guarded steps), and beside four CPU hogs each tick's
# catch-up made the next one later, until the node published 2 joint states a
# second with gaps up to 1 s (test_collision_node in ci71). 0.1 s: 10 grid
# points at 100 Hz, 25 at 250 Hz.
CATCH_UP_S = 0.1
# Committed points older than this (s) behind the clock are forgotten.
KEEP_S = 1.0
# position_array: no array sent for this many periods is a stall (the forward
# controller held the last one): the plan restarts there, at rest.
STALL_PERIODS = 1.5
# A gap between ticks (or arrays) longer than this is a clock jump (a
# simulator's clock set forward, a suspended process), not motion time. Not
# shorter: the joint_states output restarts its trajectory from where the tip
# is, and on a machine loaded 3x over ticks 0.25-0.5 s apart came often enough
# (21 in 40 s) that a long move never finished its trajectory.
CLOCK_JUMP_S = 1.0
# A time this little before the latest one seen is rounding (two timers'
# instants in float seconds), not a clock going back, s.
CLOCK_BACK_SLACK_S = 1e-6
# A tail longer than this many steps is cut (a speed limit far above what the
# acceleration limit stops quickly; the tail still ends at rest: see _tail).
MAX_TAIL_STEPS = 20000


def controller_lead(period: float, budget_s: float) -> float:
    """Return the lead, s, of a stream a controller reads: the budget + CONTROLLER_LEAD_PERIODS."""
    return budget_s + CONTROLLER_LEAD_PERIODS * period


@dataclass(frozen=True, eq=False)
class PlanPoint:
    """One committed command: positions, velocities, accelerations (n,) at ``time`` (s)."""

    time: float
    q: FloatArray
    v: FloatArray
    a: FloatArray


class CommandStream:
    """The tracker's commands on a grid, jerk-limited, committed ``lead_s`` ahead (module doc).

    Args:
        tracker: the motion tracker (its clock becomes the grid's).
        period: the grid's step h, seconds (the node's period), > 0.
        lead_s: how far ahead of the clock commands are committed, seconds, >= 0.
        jerk: one jerk limit or one per joint (chain order), > 0; inf: none.
        budget_s: the latency budget the lead covers (for the late-tick rule), s.
        stage: builds the smoothing stage as ``stage(q, period, steps)``
            (default JerkFilter; ik_bench passes Ruckig's for comparison).

    """

    def __init__(self, tracker: MotionTracker, period: float, lead_s: float, jerk,
                 budget_s: float = 0.0, stage=JerkFilter):
        """Start committed at the tracker's state and clock."""
        if not (math.isfinite(period) and period > 0.0 and math.isfinite(lead_s)
                and lead_s >= 0.0 and math.isfinite(budget_s) and budget_s >= 0.0):
            raise InvalidInputError(f'CommandStream: expected period > 0, lead_s >= 0 and '
                                    f'budget_s >= 0, received {period!r}, {lead_s!r}, '
                                    f'{budget_s!r}')
        self.tracker = tracker
        self._stage = stage
        self.h = float(period)
        self.lead_s = float(lead_s)
        self.budget_s = float(budget_s)
        self.tails_adopted = 0
        self.idle_skips = 0
        self.stalls = 0
        self.clock_jumps_back = self.clock_jumps_forward = 0
        self._stopping = False   # braking to rest after the clock went back
        self._sampled_at: Optional[float] = None   # position_array: the instant last sent
        self._sent_at = 0.0                          # and the clock when it was sent
        self._seen: Optional[float] = None   # the latest time given to advance or send
        self._cadence = 0.0   # the last positive step between two of those times, s
        self._jerk = self._check_jerk(jerk)
        self._tail: Optional[List[PlanPoint]] = None
        self._published_end: Optional[float] = None
        self.restart(tracker.time, tracker.q, tracker.v)

    def _check_jerk(self, jerk) -> FloatArray:
        values = np.array(jerk, dtype=np.float64).reshape(-1)
        if np.all(np.isinf(values)) and np.all(values > 0.0):
            return np.full(self.tracker.chain.n, math.inf)
        return check_jerk_limits(values, self.tracker.chain.n)

    # -- state ------------------------------------------------------------------------

    @property
    def end_time(self) -> float:
        """Time of the newest committed point, seconds."""
        return self._points[-1].time

    @property
    def delay_s(self) -> float:
        """The jerk stage's lag behind the limiting step for a steady motion, seconds."""
        return self.filter.delay_s

    def at_rest(self) -> bool:
        """Return True when the plan rests: limiting step and jerk stage both still."""
        return bool(np.all(self.tracker.v == 0.0)) and self.filter.at_rest()

    def restart(self, time: float, q, v=None) -> None:
        """Continue from the state (q, v) at ``time`` (a measured state), committed there.

        The positions are clipped into the position limits (a measured state
        may lie a little beyond), the velocities into the speed limits (zero when not finite
        or of the wrong size). The jerk stage restarts on the steady motion
        through (q, v); the limiting step continues from its input, ahead by the
        stage's delay (at rest when that motion, before or after q, would leave the
        position limits, or when the limiting step could not stop from there within
        them at its acceleration limits: LimitingStep.can_stop).
        """
        chain = self.tracker.chain
        q = np.clip(np.array(q, dtype=np.float64), chain.lower, chain.upper)
        v = np.zeros(chain.n) if v is None else np.array(v, dtype=np.float64)
        if v.shape != q.shape or not np.all(np.isfinite(v)):
            v = np.zeros(chain.n)
        v = np.clip(v, -chain.velocity, chain.velocity)   # a measured state may exceed them
        self.filter = self._stage(q, self.h, self._window())
        self._cap_accelerations()
        inner = self.filter.reset(q, v)
        if not (all(chain.within_limits(x) for x in self.filter.inputs())
                and self.tracker.stepper.can_stop(inner, v)):
            # The steady motion through (q, v) left the limits, or the limiting
            # step, ahead of q by the stage's delay, could not stop before them.
            v = np.zeros(chain.n)
            inner = self.filter.reset(q)
        self.tracker.sync(time, inner, v)
        self._points: Deque[PlanPoint] = collections.deque(
            [PlanPoint(float(time), q, v, np.zeros(chain.n))])
        self.restarted_at = float(time)
        self._tail = None
        self._published_end = None
        self._sampled_at = None

    def clock_jumped(self, last: float, now: float) -> None:
        """Re-base the plan on a clock that jumped from ``last`` to ``now`` (s).

        A simulator reset: the whole plan lies in the future of the new clock
        (a clock set forward: in its past).
        Every committed point moves by ``now - last`` (the motion itself is
        unchanged: position, velocity, acceleration and jerk go on without a
        seam); from the end of what is committed the arm comes to a controlled
        stop within every limit (the jerk stage at rest too), then heads for
        its target again (MotionTracker.stop_then_resume).
        """
        shift = float(now) - float(last)
        self._points = collections.deque(
            replace(p, time=p.time + shift) for p in self._points)
        self._tail = None
        self._published_end = None if self._published_end is None else \
            self._published_end + shift
        self._sampled_at = None if self._sampled_at is None else self._sampled_at + shift
        self._sent_at += shift
        self.restarted_at += shift
        self.tracker.stop_then_resume(self.tracker.time + shift)
        self._stopping = True

    def use_tracker(self, tracker: MotionTracker) -> None:
        """Continue with another tracker of the same joints (a new model), keeping the plan.

        The committed points, the jerk stage's history and the clock stay: with
        a tracker that continues the old one's state (carry.carried_over)
        the commands go on without a seam.

        Raises:
            InvalidInputError: the tracker's joints are not this stream's.

        """
        if tracker.joint_names != self.tracker.joint_names:
            raise InvalidInputError('use_tracker: another robot (other joints): start a new '
                                    'stream')
        self.tracker = tracker
        self._tail = None
        self._cap_accelerations()

    def set_jerk(self, jerk) -> None:
        """Use new jerk limits (one or n values > 0): at once at rest, else from the next rest."""
        self._jerk = self._check_jerk(jerk)
        self._refresh_window()

    def _window(self) -> int:
        return smoothing_steps(self.h, self.tracker.accelerations, self._jerk)

    def _cap_accelerations(self) -> None:
        """Cap the limiting step's accelerations at j W / 2: the jerk stage then keeps j."""
        if isinstance(self.filter, JerkFilter):
            self.tracker.cap_accelerations(0.5 * self._jerk * (self.filter.m * self.h))

    def _refresh_window(self) -> None:
        """At rest, take the window the current limits need (a change of limits waits for it)."""
        if self.at_rest() and self._window() != self.filter.m:
            self.filter = self._stage(self.tracker.q, self.h, self._window())
        self._cap_accelerations()

    # -- planning -----------------------------------------------------------------------

    def advance(self, now: float, reference=None) -> int:
        """Commit grid points up to ``now + lead_s``; return how many were added.

        New motion is never committed before ``now + lead_s``: what comes
        earlier may already be playing at the controller from the previous
        message (its committed points, its tail, or rest after it).

        Args:
            now: the clock, seconds.
            reference: (n,) joints the IK starts from (the measured ones), or None.

        """
        self._watch_clock(now)
        self._refresh_window()
        horizon = now + self.lead_s
        if not self._restarted_after_array_stall(now) and self._published_end is not None and \
                now + self.budget_s + LATE_MARGIN * self.h > self._published_end:
            self._adopt_tail(horizon)
        self._published_end = None
        if not self._skip_if_idle(horizon - self.h):
            self._brake_through_stall(horizon - self.lead_s - CATCH_UP_S)
        added = 0
        while self._next_within(horizon):
            t = self.end_time + self.h
            cmd = self.tracker.brake(t) if self._stopping else self.tracker.command(t, reference)
            self._commit(t, cmd.q)
            self._stopping = self._stopping and not self.at_rest()
            added += 1
        self._tail = None
        self._forget(now)
        return added

    def _next_within(self, horizon: float) -> bool:
        """Return True when the next grid instant is at or before ``horizon`` (up to rounding)."""
        return self.end_time + self.h <= horizon + _rounding(horizon)

    def _commit(self, time: float, inner: FloatArray) -> PlanPoint:
        started = _clock()
        point = self._point(time, inner)
        self._points.append(point)
        self.tracker.costs.add('jerk', _clock() - started)
        return point

    def _skip_if_idle(self, time: float) -> bool:
        """At rest and before ``time`` (s): move the plan's clock there in one point; say so."""
        if not (self.at_rest() and self.end_time < time - _rounding(time)):
            return False
        last = self._points[-1]   # one point, no motion, no steps
        self.tracker.skip_to(time)
        self._points.append(PlanPoint(float(time), last.q, last.v, last.a))
        self.idle_skips += 1
        return True

    def _brake_through_stall(self, until: float) -> None:
        """Brake until ``until`` (s) after a stall, at rest skip to it: motion is planned after."""
        if self._next_within(until):
            self._adopt_tail(until)
            self._skip_if_idle(until)

    def _adopt_tail(self, horizon: float) -> None:
        """Commit the braking tail (the controller may be playing it) up to ``horizon``, s."""
        self.tails_adopted += 1
        while self._next_within(horizon) and not self.at_rest():
            t = self.end_time + self.h
            self.tracker.brake(t)
            self._commit(t, self.tracker.q)

    def _forget(self, now: float) -> None:
        while len(self._points) > 2 and self._points[1].time <= now - KEEP_S:
            self._points.popleft()

    # -- output -------------------------------------------------------------------------

    def command_range(self, start: float, end: float) -> Tuple[FloatArray, FloatArray]:
        """Return (lowest, highest) (n,) commanded positions over [start, end], seconds.

        The committed points in the interval and the commands at both ends
        (sampled as a controller plays them; before the oldest point kept:
        that point). The cubic between two grid points may pass its ends by
        at most a|h^2|/8-order amounts (micro-radians at the limits): ignored.
        """
        ends = [self.sample(start)[0], self.sample(end)[0]]
        inside = [p.q for p in self._points if start < p.time < end]
        stacked = np.array(ends + inside)
        return stacked.min(axis=0), stacked.max(axis=0)

    def tail(self) -> List[PlanPoint]:
        """Return the braking tail after the newest committed point, to rest (once per advance).

        From the tracker's state and a copy of the jerk stage (:func:`braking_tail`).
        """
        if self._tail is not None:
            return self._tail
        tracker = self.tracker
        tail = braking_tail(tracker.stepper, tracker.q, tracker.v, tracker.time,
                            self.filter.copy(), self.end_time, self.h)
        self._tail = tail
        return tail

    def _point(self, time: float, inner: FloatArray) -> PlanPoint:
        """Push the limiting step's position; return the stage's output as a plan point.

        The output is a mean of positions within the limits: within them up to
        rounding (2-4e-16 past a limit was seen), which the clip removes.
        """
        z, dz, ddz = self.filter.push(inner)
        chain = self.tracker.chain
        return PlanPoint(time, np.clip(z, chain.lower, chain.upper), dz, ddz)

    def horizon(self, now: float) -> List[PlanPoint]:
        """Return what a message carries: committed points from ``now - budget_s``, then the tail.

        The first point is the newest committed one at or before ``now -
        budget_s``: a controller whose clock is behind the node's by up to the
        budget still finds its own now inside the message and samples the plan
        (never a spline of its own from its measured state to a first point in
        its future). When the plan starts later (a restart) at rest, that
        state is also its state at ``now - budget_s``. Cost: budget_s / period
        more points per message (3 at the defaults). Records the committed
        end, for the late-tick rule of the next advance.
        """
        start = now - self.budget_s
        times = [p.time for p in self._points]
        first = max(0, bisect.bisect_right(times, start) - 1)
        points = list(self._points)[first:] + self.tail()
        head = points[0]
        if head.time > start and not np.any(head.v) and not np.any(head.a):
            points.insert(0, PlanPoint(start, head.q, head.v, head.a))
        self._published_end = self.end_time
        return points

    def send(self, time: float, due: Optional[float] = None) -> FloatArray:
        """Positions (n,) to send at ``time`` on a stream without stamps (position_array).

        Args:
            time: the clock now, s (the clock watch and the stall rule read it).
            due: the instant the sender's timer was due, s (at most ``time``):
                the plan is sampled there, so that a callback the scheduler
                ran late sends the same positions as one on time (None: at
                ``time``).

        Remembered: a gap of more than STALL_PERIODS before the next advance
        restarts the plan where the controller held (see advance).
        """
        time = float(time)
        self._watch_clock(time)
        self._restarted_after_array_stall(time)
        at = time if due is None else min(float(due), time)
        self._sent_at, self._sampled_at = time, at
        self._published_end = self.end_time
        return self.sample(at)[0]

    def _watch_clock(self, time: float) -> None:
        """Re-base the plan when the clock jumped (clock_jumped).

        Back: ``time`` before the latest time seen. Forward, while position
        arrays are sent: more than CLOCK_JUMP_S after it (the forward
        controller got no gap, only the clock moved; a shorter gap is a stall:
        see _restarted_after_array_stall). The command continues from where
        the plan was one cadence (the callers' last step) after the latest
        time seen: the instant the hardware is at now, as far as the callers'
        rhythm tells.
        """
        time = float(time)
        if self._seen is not None and time < self._seen - CLOCK_BACK_SLACK_S:
            self.clock_jumps_back += 1
            self.clock_jumped(self._seen + self._cadence, time)
        elif self._seen is not None and self._sampled_at is not None and \
                time - self._seen > CLOCK_JUMP_S:
            self.clock_jumps_forward += 1
            self.clock_jumped(self._seen + self._cadence, time)
        elif self._seen is not None and time <= self._seen:
            return   # rounding: the latest time stays
        elif self._seen is not None:
            self._cadence = time - self._seen
        self._seen = time

    def _restarted_after_array_stall(self, now: float) -> bool:
        """position_array: restart where the controller held after a gap in the arrays sent.

        A gap of more than STALL_PERIODS periods since the last array (a
        stalled node, a clock set forward) is not motion time: the forward
        controller held the last array, so the plan restarts there, at rest.
        """
        if self._sampled_at is None or now - self._sent_at <= STALL_PERIODS * self.h:
            return False
        self.stalls += 1
        self.restart(now, self.sample(self._sampled_at)[0])
        return True

    def sample(self, time: float) -> Tuple[FloatArray, FloatArray, FloatArray]:
        """Return the committed command at ``time``: (q, v, a) (n,), cubic between grid points.

        Before the oldest point kept: that point; after the newest: the
        braking tail (then rest at its end), as a controller would play it.
        """
        points = list(self._points)
        if time > points[-1].time:
            points += self.tail()
        times = [p.time for p in points]
        k = bisect.bisect_right(times, time) - 1
        if k < 0:
            p = points[0]
            return p.q.copy(), p.v.copy(), p.a.copy()
        if k >= len(points) - 1:
            p = points[-1]
            return p.q.copy(), p.v.copy(), p.a.copy()
        q, v, a = _cubic(points[k], points[k + 1], time)
        chain = self.tracker.chain   # the cubic is a mean of in-limit positions, up to rounding
        return np.clip(q, chain.lower, chain.upper), v, a


def braking_tail(stepper: LimitingStep, q: FloatArray, v: FloatArray, time: float, stage,
                 start: float, h: float) -> List[PlanPoint]:
    """Return the plan points from ``start`` (s) on, every ``h`` s, while the joints brake to rest.

    A pure function of the state: the limiting step brakes (q, v) (n,) at
    ``time`` toward rest at the acceleration limits, and ``stage``, a copy
    of the jerk stage, is pushed each braked position (its outputs are the
    points, clipped to the position limits). It ends when both rest, or
    after MAX_TAIL_STEPS; the last point has velocities and accelerations
    exactly zero.
    """
    chain = stepper.chain
    tail: List[PlanPoint] = []
    t = start
    for _ in range(MAX_TAIL_STEPS):
        if np.all(v == 0.0) and stage.at_rest():
            break
        t += h
        if t > time:
            q, v = stepper.braked(q, v, t - time)
            time = t
        z, dz, ddz = stage.push(q)
        tail.append(PlanPoint(t, np.clip(z, chain.lower, chain.upper), dz, ddz))
    if tail:
        last = tail[-1]
        zero = np.zeros_like(last.q)
        tail[-1] = PlanPoint(last.time, last.q, zero, zero)
    return tail


def _rounding(time: float) -> float:
    """Return the slack, s, below which two instants near ``time`` are one (float rounding).

    A grid instant built as ``end + h`` and one built as ``now + lead - h``
    may differ by 1e-17 s: without it an idle skip added a second point that
    close to the last, and a controller refuses times that do not increase.
    """
    return 1e-12 * max(1.0, abs(time))


def _cubic(start: PlanPoint, end: PlanPoint, time: float):
    """(q, v, a) at ``time`` on the constant-jerk cubic from start to end (the jerk stage's)."""
    span = end.time - start.time
    s = time - start.time
    jerk = (end.a - start.a) / span
    q = start.q + start.v * s + start.a * (s * s / 2.0) + jerk * (s ** 3 / 6.0)
    v = start.v + start.a * s + jerk * (s * s / 2.0)
    a = start.a + jerk * s
    return q, v, a
