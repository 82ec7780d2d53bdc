# SPDX-License-Identifier: Apache-2.0

"""A Cartesian trajectory fed online with target keys, sampled at any time.

Keys (time, position, quaternion) are joined by cubic segments: position by
the scalar rule per axis, orientation by the exp-map spherical rule (seed
002, :mod:`ik_node.core.motion.smoothing`). A segment from key k to key k+1 needs
keys k-1 and k+2; its four keys are latched when playback enters it, so the
curve never changes under the sampler.

Defined behaviour (all times in seconds on the caller's clock):

* **Start after rest.** A key arriving while the trajectory rests starts a
  segment from the current pose (at rest, zero-length ``pre``) to the key,
  timed by the speed limits (``SPEED_MARGIN`` x distance / limit, at least
  ``min_move_s``), ending at rest unless the next key is known by then.
* **Streams.** Each key is timed at its arrival, but never earlier than the
  previous key plus the time the speed limits need between them (then it is
  re-timed, counted in ``retimed``). Keys never enter the past: a key older
  than the newest is re-timed after it. A key identical to the newest one is
  ignored (``duplicates``). At most ``max_pending`` keys wait; beyond, the
  oldest waiting key is dropped (``dropped``).
* **Latency.** With ``smooth=True`` playback runs ``latency_s`` behind the
  keys: twice the mean key interval (so that key k+2 is known when segment
  k starts), at most ``max_latency_s``. A segment whose key k+2 is still
  unknown when it starts ends at rest (C1 holds there with zero velocity).
  With ``smooth=False`` there is no delay and an unknown key k+2 is
  extrapolated at constant velocity: lowest latency, but velocity may jump
  when the real key differs.
* **End of stream.** The last segment ends at rest on the last key (Godot's
  zero-length ``post`` span: zero velocity, no overshoot for keys spaced by
  the speed limits).
* **Speed limits.** Keys are spaced so that the limits hold; as a safety
  net each sample slows the playback rate until the curve's linear and
  angular speeds are within ``max_linear_speed`` / ``max_angular_speed``.
"""

from dataclasses import dataclass
import math
from typing import List, Optional, Tuple

from ik_node.core import rotations as rot
from ik_node.core.errors import InvalidInputError
from ik_node.core.motion.smoothing import cubic_interpolate_vector3, segment_keys, \
    spherical_at, spherical_cubic_interpolate_in_time
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# A rest-to-rest cubic segment peaks at 1.5x its mean speed; keys are spaced
# by this factor times distance / speed limit.
SPEED_MARGIN = 1.5
# Step of the one-sided differences giving the curve's velocities (forward,
# backward at a segment's end: _Segment.state), seconds.
VELOCITY_STEP_S = 1e-6
# Poses closer than this (metres, radians) to the newest key are duplicates.
DUPLICATE_TOL = 1e-12


@dataclass(frozen=True)
class TrajectorySample:
    """The trajectory at one instant.

    Attributes:
        position: (3,) metres, base frame.
        quaternion: (4,) (x, y, z, w), unit.
        linear_velocity: (3,) m/s.
        angular_velocity: (3,) rad/s, base (world) frame: 2 q_dot q^-1.
        at_rest: True when no motion is planned beyond this sample.
        phase_s: trajectory time of this sample (seconds on the keys' clock).

    """

    position: FloatArray
    quaternion: FloatArray
    linear_velocity: FloatArray
    angular_velocity: FloatArray
    at_rest: bool
    phase_s: float


@dataclass
class _Key:
    t: float
    p: FloatArray
    q: FloatArray
    rest: bool = False  # the curve arrives here at rest (so it also leaves at rest)


class _Segment:
    """One cubic segment with its four keys latched."""

    def __init__(self, pre: _Key, start: _Key, end: _Key, post: _Key):
        self.t0 = start.t
        self.duration = end.t - start.t
        self.pre_t = pre.t - start.t
        self.post_t = post.t - start.t
        self.keys = (pre, start, end, post)
        self._spherical: Optional[tuple] = None   # the orientation keys' logs (first pose)

    def pose(self, phase: float) -> Tuple[FloatArray, FloatArray]:
        pre, start, end, post = self.keys
        w = 1.0 if self.duration <= 0.0 else min(max((phase - self.t0) / self.duration, 0.0), 1.0)
        p = cubic_interpolate_vector3(start.p, end.p, pre.p, post.p, w, self.duration,
                                      self.pre_t, self.post_t)
        if self._spherical is None:
            self._spherical = segment_keys(start.q, end.q, pre.q, post.q) or ()
        if not self._spherical:   # not four valid quaternions: the checked path says why
            return p, spherical_cubic_interpolate_in_time(start.q, end.q, pre.q, post.q, w,
                                                          self.duration, self.pre_t, self.post_t)
        q = spherical_at(self._spherical, w, self.duration, self.pre_t, self.post_t)
        return p, q

    def state(self, phase: float):
        """Pose and velocities at phase: (p, q, linear m/s, world angular rad/s).

        Velocities by a one-sided difference pointing into the segment (one
        extra evaluation): angular velocity is 2 q_dot q^-1 (seed 003).
        """
        p, q = self.pose(phase)
        end = self.t0 + self.duration
        h = VELOCITY_STEP_S if phase + VELOCITY_STEP_S <= end else -VELOCITY_STEP_S
        if self.duration <= abs(h):
            return p, q, np.zeros(3), np.zeros(3)
        p2, q2 = self.pose(phase + h)
        q2 = q2 if float(q @ q2) >= 0.0 else -q2
        omega = 2.0 * rot._multiply((q2 - q) / h, q * np.array([-1.0, -1.0, -1.0, 1.0]))[:3]
        return p, q, (p2 - p) / h, omega


class CartesianTrajectory:
    """Online cubic trajectory of target keys (see the module docstring).

    Args:
        position: (3,) start pose position, metres.
        quaternion: (4,) start orientation (x, y, z, w).
        time: the caller's clock at the start, seconds.
        max_linear_speed: m/s, > 0.
        max_angular_speed: rad/s, > 0.
        smooth: True for C1 motion through a stream (latency of two key
            intervals, bounded), False for no added latency.
        max_latency_s: bound of the latency in smooth mode, seconds.
        min_move_s: shortest duration of a move started from rest, seconds.
        max_pending: keys allowed to wait; older ones are dropped beyond.

    Raises:
        InvalidInputError: non-finite pose or an option out of range.

    """

    def __init__(self, position, quaternion, time: float = 0.0, *,
                 max_linear_speed: float = 0.5, max_angular_speed: float = 1.0,
                 smooth: bool = True, max_latency_s: float = 0.5, min_move_s: float = 0.2,
                 max_pending: int = 32):
        """Start at rest at the given pose."""
        for label, value in (('max_linear_speed', max_linear_speed),
                             ('max_angular_speed', max_angular_speed),
                             ('min_move_s', min_move_s)):
            if not (math.isfinite(value) and value > 0.0):
                raise InvalidInputError(f'{label}: expected a finite number > 0, '
                                        f'received {value!r}')
        if not (math.isfinite(max_latency_s) and max_latency_s >= 0.0):
            raise InvalidInputError(f'max_latency_s: expected a finite number >= 0, '
                                    f'received {max_latency_s!r}')
        if not (isinstance(max_pending, int) and max_pending >= 2):
            raise InvalidInputError(f'max_pending: expected an integer >= 2, received '
                                    f'{max_pending!r}')
        self.max_linear_speed = float(max_linear_speed)
        self.max_angular_speed = float(max_angular_speed)
        self.smooth = bool(smooth)
        self.max_latency_s = float(max_latency_s)
        self.min_move_s = float(min_move_s)
        self.max_pending = max_pending
        self.retimed = self.duplicates = self.dropped = 0
        self.reset(position, quaternion, time)

    # -- state --------------------------------------------------------------------

    def reset(self, position, quaternion, time: float) -> None:
        """Drop every key and rest at the given pose."""
        p, q = self._check_pose(position, quaternion)
        t = self._check_time(time)
        self._keys: List[_Key] = [_Key(t, p, q)]
        self._segment: Optional[_Segment] = None
        self._index = 0          # keys[index] is where the current segment starts
        self._phase = t
        self._last_time = t
        self._intervals: List[float] = []
        self._last_arrival: Optional[float] = None
        self._last_rate = 1.0
        self._cache: Optional[tuple] = None

    @property
    def latency_s(self) -> float:
        """Delay of playback behind the keys' clock, seconds (0 when not smooth)."""
        if not self.smooth or not self._intervals:
            return 0.0
        return min(2.0 * sum(self._intervals) / len(self._intervals), self.max_latency_s)

    @property
    def pending(self) -> int:
        """Keys not reached yet."""
        return len(self._keys) - 1 - self._index

    def planned_positions(self) -> FloatArray:
        """Return (k, 3) positions (metres) of the current segment's start and every later key."""
        return np.array([key.p for key in self._keys[self._index:]])

    @property
    def at_rest(self) -> bool:
        """True when the last key is reached and nothing else is planned."""
        return self.pending == 0 and self._segment is None

    # -- input ---------------------------------------------------------------------

    def add_key(self, time: float, position, quaternion) -> str:
        """Append a target key; return 'accepted', 'retimed' or 'duplicate'.

        Raises:
            InvalidInputError / ZeroNormError: non-finite values, zero quaternion.

        """
        p, q = self._check_pose(position, quaternion)
        t = self._check_time(time)
        newest = self._keys[-1]
        if np.linalg.norm(p - newest.p) <= DUPLICATE_TOL and \
                _angle(newest.q, q) <= DUPLICATE_TOL:
            self.duplicates += 1
            return 'duplicate'
        self._note_arrival(t)
        if self.at_rest:
            # Start from the current pose now (playback clock), timed by the limits.
            start = self._keys[-1]
            start.t = max(self._phase, start.t)
            self._keys = [start]
            self._index = 0
            earliest = start.t + max(self._min_spacing(start, p, q), self.min_move_s)
        else:
            earliest = newest.t + self._min_spacing(newest, p, q)
        arrival = t
        key_t = max(arrival, earliest)
        status = 'accepted'
        if key_t > arrival + 1e-12 and not self.at_rest:
            self.retimed += 1
            status = 'retimed'
        self._keys.append(_Key(key_t, p, q))
        self._trim()
        return status

    def _note_arrival(self, t: float) -> None:
        if self._last_arrival is not None and t > self._last_arrival:
            self._intervals = (self._intervals + [t - self._last_arrival])[-8:]
        self._last_arrival = t

    def _trim(self) -> None:
        """Drop the oldest waiting keys beyond max_pending (never entered ones)."""
        while self.pending > self.max_pending:
            first_waiting = self._index + 2 if self._segment is not None else self._index + 1
            if first_waiting >= len(self._keys) - 1:
                break
            del self._keys[first_waiting]
            self.dropped += 1

    def _min_spacing(self, key: _Key, p: FloatArray, q: FloatArray) -> float:
        return SPEED_MARGIN * max(float(np.linalg.norm(p - key.p)) / self.max_linear_speed,
                                  _angle(key.q, q) / self.max_angular_speed)

    # -- output --------------------------------------------------------------------

    def sample(self, time: float) -> TrajectorySample:
        """Advance playback to ``time`` (caller's clock) and return the pose there."""
        t = self._check_time(time)
        dt = max(t - self._last_time, 0.0)
        self._last_time = max(t, self._last_time)
        target_phase = t - self.latency_s
        if self.at_rest:
            self._phase = max(self._phase, target_phase)
            key = self._keys[-1]
            return TrajectorySample(key.p.copy(), key.q.copy(), np.zeros(3), np.zeros(3), True,
                                    self._phase)
        self._advance(dt, target_phase)
        if self._segment is None:
            if self.at_rest:
                key = self._keys[self._index]
                return TrajectorySample(key.p.copy(), key.q.copy(), np.zeros(3), np.zeros(3),
                                        True, self._phase)
            self._enter_segment()  # exactly on a key: report the next segment's start
        assert self._segment is not None
        if self._cache is None or self._cache[0] != self._phase:
            self._cache = (self._phase, *self._segment.state(self._phase))
        _, p, q, v, w = self._cache
        scale = self._rate(v, w)
        return TrajectorySample(p, q, v * scale, w * scale, False, self._phase)

    def _rate(self, v: FloatArray, w: FloatArray) -> float:
        speed, spin = math.hypot(*v.tolist()), math.hypot(*w.tolist())
        rate = 1.0
        if speed > self.max_linear_speed:
            rate = min(rate, self.max_linear_speed / speed)
        if spin > self.max_angular_speed:
            rate = min(rate, self.max_angular_speed / spin)
        return rate

    def _advance(self, dt: float, target_phase: float) -> None:
        """Move the phase forward by up to dt of wall time, slowed by the speed limits.

        The phase never passes ``target_phase`` (the keys' clock minus the
        latency). A step is taken at the rate the limits allowed at the last
        sample; if they are tighter where it lands, it is shortened to that
        rate. The landing state is kept for ``sample``.
        """
        remaining = dt
        while remaining > 0.0 and not self.at_rest:
            if self._segment is None:
                self._enter_segment()
            seg = self._segment
            assert seg is not None
            end = seg.t0 + seg.duration
            room = min(end - self._phase, target_phase - self._phase)
            if room <= 0.0:
                return
            rate = self._last_rate
            step = min(remaining * rate, room)
            state = seg.state(self._phase + step)
            landing_rate = self._rate(state[2], state[3])
            if landing_rate < rate:
                rate = landing_rate
                step = min(remaining * rate, room)
                state = seg.state(self._phase + step)
                rate = min(rate, self._rate(state[2], state[3]))
            self._last_rate = max(min(1.0, landing_rate if landing_rate > rate else rate), 1e-3)
            self._phase += step
            self._cache = (self._phase, *state)
            remaining -= step / max(rate, 1e-3)
            if self._phase >= end - 1e-12:
                self._phase = end
                self._segment = None
                self._cache = None
                self._index += 1

    def _enter_segment(self) -> None:
        """Latch the four keys of the segment from keys[index] to keys[index + 1]."""
        i = self._index
        start, end = self._keys[i], self._keys[i + 1]
        start.t = self._phase  # playback may lag the schedule (speed limits)
        if end.t <= start.t:
            end.t = start.t + max(self._min_spacing(start, end.p, end.q), 1e-9)
        if i == 0 or start.rest:
            pre = _Key(start.t, start.p, start.q)  # zero-length span: leave at rest
        else:
            pre = self._keys[i - 1]
        if i + 2 < len(self._keys):
            post = self._keys[i + 2]
        elif self.smooth:
            post = _Key(end.t, end.p, end.q)  # next key unknown: arrive at rest
            end.rest = True
        else:
            post = _extrapolated(start, end)
        self._segment = _Segment(pre, start, end, post)

    # -- validation -------------------------------------------------------------------

    @staticmethod
    def _check_pose(position, quaternion) -> Tuple[FloatArray, FloatArray]:
        p = rot.check_vector3(position, 'position')
        if p.shape != (3,):
            raise InvalidInputError(f'position: expected shape (3,), received {p.shape}')
        q = rot.normalize(quaternion)
        if q.shape != (4,):
            raise InvalidInputError(f'quaternion: expected shape (4,), received {q.shape}')
        return p.copy(), q

    @staticmethod
    def _check_time(time: float) -> float:
        t = float(time)
        if not math.isfinite(t):
            raise InvalidInputError(
                f'time: expected a finite number of seconds, received {time!r}')
        return t


def _angle(a: FloatArray, b: FloatArray) -> float:
    """Rotation angle between two unit quaternions, radians in [0, pi].

    ``4 atan2(|a - b|, |a + b|)`` (b's sign taken nearer a): twice the angle
    between the two as 4-vectors, exact 0 for equal ones. The form from
    ``|a . b|`` (``2 atan2(sqrt(1 - d^2), d)``) gave 3e-8 rad for a
    quaternion and itself (d rounds to 1 - 1e-16), so a key equal to the
    last one was not a duplicate and started a 0.2 s move to where it was.
    """
    b = b if float(a @ b) >= 0.0 else -b
    return 4.0 * math.atan2(float(np.linalg.norm(a - b)), float(np.linalg.norm(a + b)))


def _extrapolated(start: _Key, end: _Key) -> _Key:
    """Extrapolate a key one segment beyond ``end`` at constant velocity (low latency)."""
    dq = rot.multiply(rot.conjugate(start.q), end.q)
    return _Key(end.t + (end.t - start.t), end.p + (end.p - start.p), rot.multiply(end.q, dq))
