# SPDX-License-Identifier: Apache-2.0

"""Measured joint states: which ones the motion may follow.

A single bad joint state must never move the command: :class:`FeedbackFilter`
takes each measured state (names, positions, optional velocities, the
header stamp, the arrival time) and accepts it, or rejects it with a reason
counted in ``rejected``:

* ``incomplete``: a joint of the chain missing, or fields of other lengths;
* ``duplicate_joint``: a joint of the chain named twice;
* ``not_finite``: a position (or a given velocity) NaN or infinite;
* ``out_of_limits``: a position beyond a limit by more than LIMIT_SLACK;
* ``out_of_order``: a stamp older than the last accepted state's;
* ``stale``: a stamp older than its arrival by more than the feedback timeout
  (stamps and the node on one clock: ros2_control's joint_state_broadcaster
  stamps with the controller manager's clock; the same machine, or clocks
  synchronised, or both on ``/clock``);
* ``implausible_jump``: a move from the last accepted state that no joint
  could make at JUMP_FACTOR x its speed limit in the time between their
  stamps (arrival times without stamps), plus JUMP_SLACK. A new position
  that holds is taken once CONFIRMATIONS states in a row agree with each
  other (plausible from one to the next): a real displacement (the arm
  pushed, a controller switched) is followed, a glitch is not.

What the motion does with the accepted states is :class:`FeedbackPolicy`'s
decision (hold, start from the measured state, or re-sync), judged against
the command history of the :class:`ik_node.core.motion.stream.CommandStream`:

**Lag is not a disturbance.** A position servo follows its setpoint with a
lag; a first-order servo of time constant tau is at a weighted mean of the
setpoints it was given, the weights decaying as exp(-s / tau). So a measured
position within the range of the commands of the last LAG_WINDOW_TAUS x
``servo_lag`` seconds (e^-4: 1.8 % of an older excursion left), widened by
``tolerance``, is explained by lag, however fast the joint moves; an
over-damped second-order servo (a PD loop) too, and its small overshoot and
gravity sag count against ``tolerance``. A position outside that range is a
disturbance (pushed, another controller, an e-stop released): the plan
restarts from the measured position and velocity. Detection: at the first
accepted state outside (a displacement is accepted once CONFIRMATIONS states
agree), which for an arm holding still or pushed ahead of its motion is the
first confirmed state displaced by more than ``tolerance``; for a joint pushed
back along its path, once the range's trailing end passes it (within the
window while the joint keeps its direction).

Units: rad (m for prismatic joints), seconds. No ROS here: the node passes
the message's fields and its clock.
"""

import collections
import math
from typing import Counter, Optional, Sequence, Tuple, TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # only for annotations: stream imports the tracker
    from ik_node.core.motion.stream import CommandStream

FloatArray = npt.NDArray[np.float64]

# Positions this far beyond a limit are still a real arm's (encoder rounding, a
# servo's overshoot at a limit): clipped by the node, not rejected.
LIMIT_SLACK = 0.01
# A measured move faster than this times the speed limit between two states is
# not physical (an arm is not moved faster than its drives can follow).
JUMP_FACTOR = 1.5
# Plus this much (rad): sensor noise and stamp rounding.
JUMP_SLACK = 0.005
# Consecutive mutually plausible states that make a jump real.
CONFIRMATIONS = 3
# The commands of this many servo time constants back explain a measured position.
LAG_WINDOW_TAUS = 4.0


class FeedbackFilter:
    """Accept or reject measured joint states (module docstring).

    Args:
        names: the chain's joint names (chain order).
        lower, upper: (n,) position limits.
        velocity: (n,) speed limits (> 0).

    """

    def __init__(self, names: Sequence[str], lower, upper, velocity,
                 timeout: float = math.inf):
        """Expect these joints with these limits; nothing accepted yet."""
        self.timeout = float(timeout)
        self.names = list(names)
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.velocity = np.asarray(velocity, dtype=np.float64)
        self.rejected: Counter[str] = collections.Counter()
        self.q: Optional[FloatArray] = None
        self.v: Optional[FloatArray] = None
        self.stamp: Optional[float] = None
        self.time: Optional[float] = None     # arrival time of the last accepted state
        self._candidates: list = []           # (time, q) of a jump waiting for confirmation

    def take(self, names: Sequence[str], positions: Sequence[float],
             velocities: Sequence[float], stamp: Optional[float], now: float) -> str:
        """Judge one measured state; return '' when accepted, else the reason (counted).

        Args:
            names: the message's joint names (any order, other joints allowed).
            positions: one per name.
            velocities: one per name, or empty.
            stamp: the header stamp, seconds on the node's clock (None: unstamped).
            now: the arrival time, seconds on the same clock.

        """
        if self.time is not None and now < self.time:
            self.forget()   # the clock went back: states of the old clock are void
        parsed = self._parse(names, positions, velocities)
        if isinstance(parsed, str):
            return self._reject(parsed)
        q, v = parsed
        if np.any(q < self.lower - LIMIT_SLACK) or np.any(q > self.upper + LIMIT_SLACK):
            return self._reject('out_of_limits')
        when = now if stamp is None else stamp
        if self.stamp is not None and stamp is not None and stamp < self.stamp:
            return self._reject('out_of_order')
        if stamp is not None and now - stamp > self.timeout:
            return self._reject('stale')
        if self.q is not None and not self._plausible(self.q, self._when(), q, when):
            if not self._confirmed(q, when):
                return self._reject('implausible_jump')
        self._candidates = []
        self.q, self.v, self.stamp, self.time = q, v, stamp, now
        return ''

    def _parse(self, names, positions, velocities):
        """Return (q, v) in chain order, or the reason of a malformed state."""
        if len(positions) != len(names) or (len(velocities) not in (0, len(names))):
            return 'incomplete'
        where = {}
        for k, name in enumerate(names):
            if name in where and name in self.names:
                return 'duplicate_joint'
            where[name] = k
        if any(name not in where for name in self.names):
            return 'incomplete'
        index = [where[name] for name in self.names]
        q = np.array([positions[k] for k in index], dtype=np.float64)
        v = np.array([velocities[k] for k in index], dtype=np.float64) if velocities else None
        if not np.all(np.isfinite(q)) or (v is not None and not np.all(np.isfinite(v))):
            return 'not_finite'
        return q, v

    def _when(self) -> float:
        """Return the last accepted state's stamp, or its arrival time when unstamped."""
        if self.stamp is not None:
            return self.stamp
        assert self.time is not None   # called only once a state was accepted
        return self.time

    def _plausible(self, q0: FloatArray, t0: float, q1: FloatArray, t1: float) -> bool:
        """Return True when every joint could move q0 -> q1 in t1 - t0 (module docstring)."""
        dt = max(t1 - t0, 0.0)
        reach = JUMP_FACTOR * self.velocity * dt + JUMP_SLACK
        return bool(np.all(np.abs(q1 - q0) <= reach))

    def _confirmed(self, q: FloatArray, when: float) -> bool:
        """Keep a jump as a candidate; True once CONFIRMATIONS agree in a row."""
        if self._candidates and not self._plausible(self._candidates[-1][1],
                                                    self._candidates[-1][0], q, when):
            self._candidates = []
        self._candidates.append((when, q))
        return len(self._candidates) >= CONFIRMATIONS

    def forget(self) -> None:
        """Forget every state taken (rejection counts stay): the next one is taken as it is."""
        self.q = self.v = self.stamp = self.time = None
        self._candidates = []

    def _reject(self, reason: str) -> str:
        self.rejected[reason] += 1
        return reason

    def age(self, now: float) -> float:
        """Seconds since the last accepted state arrived (inf before any)."""
        return math.inf if self.time is None else now - self.time

    def state(self) -> Tuple[Optional[FloatArray], Optional[FloatArray]]:
        """Return the last accepted (q, v) (n,), chain order; v None when not measured."""
        return self.q, self.v

    def measured_at(self) -> Optional[float]:
        """Return when the last accepted state was measured: its stamp, else its arrival."""
        return None if self.time is None else self._when()


class FeedbackPolicy:
    """What the motion starts from, each tick, given the measured states (module docstring).

    Args:
        names, lower, upper, velocity: the chain's joints and limits (FeedbackFilter).
        timeout: a state older than this (arrival; stamp too) is stale, s: hold.
        tolerance: a measured position this far outside the lag-explained
            range of commands is a disturbance, rad (m).
        servo_lag: the slowest servo time constant assumed, s (>= 0).

    Attributes:
        filter: the FeedbackFilter (rejections counted by reason).
        resyncs: disturbances followed (plan restarted from the measured state),
            also those found when fresh feedback ends a hold.
        last: what the last :meth:`decide` did: 'hold', 'sync', 'resync' or 'follow'.
        started: True once a plan started from a measured state.

    """

    def __init__(self, names: Sequence[str], lower, upper, velocity, timeout: float,
                 tolerance: float, servo_lag: float):
        """Start holding: nothing is commanded before the first measured state."""
        self.filter = FeedbackFilter(names, lower, upper, velocity, timeout)
        self.configure(timeout, tolerance, servo_lag)
        self.resyncs = 0
        self.last = 'hold'
        self.started = False   # a plan from a measured state exists
        self._synced = False
        self._decided_at: Optional[float] = None

    def configure(self, timeout: float, tolerance: float, servo_lag: float) -> None:
        """Use new settings from the next state and tick on (arguments as the constructor's)."""
        self.filter.timeout = float(timeout)
        self.tolerance = float(tolerance)
        self.servo_lag = float(servo_lag)

    def take(self, names: Sequence[str], positions: Sequence[float],
             velocities: Sequence[float], stamp: Optional[float], now: float) -> str:
        """Judge one measured state (FeedbackFilter.take): '' when accepted, else the reason."""
        return self.filter.take(names, positions, velocities, stamp, now)

    def forget(self) -> None:
        """Forget the states taken (the clock went back): hold until a fresh one comes."""
        self.filter.forget()
        self._synced = False

    @property
    def timeout(self) -> float:
        """Feedback older than this is stale, s (the filter's: stale stamps are rejected too)."""
        return self.filter.timeout

    def stale(self, now: float) -> bool:
        """Return True when no state came within the timeout (or none yet)."""
        return self.filter.age(now) > self.timeout

    def holding(self) -> bool:
        """Return True while the plan waits for a fresh state (nothing may be commanded)."""
        return not self._synced

    def decide(self, now: float, stream: 'CommandStream') -> Optional[FloatArray]:
        """Restart ``stream`` where needed; return the reference joints (n,), or None: hold.

        Hold while the feedback is stale (the controller plays the last
        message's braking tail). The next fresh state ends the hold ('sync'):
        the first ever, or one the commands' lag does not explain, restarts the
        plan from the measured position and velocity (the latter a disturbance,
        counted in ``resyncs``); one they explain lets the plan go on along the
        tail that was played. Restart from the measured state when it is a
        disturbance ('resync'); else follow ('follow'). A clock going back
        forgets the states taken on the old clock.
        """
        if self._decided_at is not None and now < self._decided_at:
            self.forget()   # the clock went back: states of the old clock are void
        self._decided_at = now
        if self.stale(now):
            self._synced = False
            self.last = 'hold'
            return None
        fb = self.filter
        assert fb.q is not None   # not stale: a state was accepted
        if not self._synced:
            disturbed = self.started and self.disturbed(stream)
            if disturbed or not self.started:
                stream.restart(now, fb.q, fb.v)
            self.resyncs += int(disturbed)
            # else the arm is where the commands played while holding (the
            # tail) put it, as far as the servo lag tells: the plan goes on
            # from them, without a step (the stream's late-tick rule).
            self._synced = self.started = True
            self.last = 'sync'
        elif self.disturbed(stream):
            stream.restart(now, fb.q, fb.v)
            self.resyncs += 1
            self.last = 'resync'
        else:
            self.last = 'follow'
        return fb.q

    def disturbed(self, stream: 'CommandStream') -> bool:
        """Return True when the last state lies outside the commands' lag-explained range.

        A state measured before the plan's last restart reflects the commands
        before it (forgotten): not judged.
        """
        fb = self.filter
        when = fb.measured_at()
        if fb.q is None or when is None or when < stream.restarted_at:
            return False
        lo, hi = stream.command_range(when - LAG_WINDOW_TAUS * self.servo_lag, when)
        return bool(np.any(fb.q < lo - self.tolerance) or np.any(fb.q > hi + self.tolerance))
