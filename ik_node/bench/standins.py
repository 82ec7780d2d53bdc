# SPDX-License-Identifier: Apache-2.0

"""Stand-ins for ros2_control's controllers and hardware, plain Python, for tests and ik_bench.

Written here from the documented and coded behaviour of ros2_controllers
(kilted / jazzy: joint_trajectory_controller.cpp, trajectory.cpp, its
parameter file and doc/; forward_command_controller's update) and of
mock_components/GenericSystem; no upstream code is copied.

* :class:`TrajectoryController` (joint_trajectory_controller, position command
  interface, topic path, the legacy replacement of kilted / jazzy):
  validation on receipt against the controller's clock (joint set, sizes,
  strictly increasing times, a last point with nonzero velocity unless
  allowed, a stamped trajectory that ends in the past); the newest valid
  message replaces the current trajectory at the next update; on its first
  sample the state before it is the measured state (velocities 0 when the
  state interface has none) at that tick, or with
  ``interpolate_from_desired_state`` the last command at its tick; the
  spline degree is chosen per segment by the fields present at both ends
  (linear, cubic with velocities, quintic with accelerations too); after the
  last point its values hold. Each update advances the trajectory's time by
  the measured period since the previous update and writes the sample one
  nominal period ahead (``command_next_``) to the hardware.
* :class:`ForwardController` (forward_position_controller): the newest array
  each update; all NaN: no command yet; a wrong size makes update() return
  an error and the controller is deactivated (writes nothing after).
* :class:`MockHardware`: state = the last command; velocity state 0.
  :class:`LagServo`: a first-order position servo with time constant tau.

Times are seconds on the shared clock (the node's and the controller's).
"""

from dataclasses import dataclass, field
import math
from typing import List, Optional

import numpy as np

FLOAT_EPS = float(np.finfo(np.float32).eps)   # the controller's "nonzero velocity" bound


@dataclass
class Point:
    """A trajectory point: time_from_start (s) and its fields (empty: absent)."""

    time_from_start: float
    positions: List[float]
    velocities: List[float] = field(default_factory=list)
    accelerations: List[float] = field(default_factory=list)


@dataclass
class Trajectory:
    """A trajectory_msgs/JointTrajectory: joint names, header stamp (s; 0 = now), points."""

    joint_names: List[str]
    stamp: float
    points: List[Point]


class MockHardware:
    """mock_components/GenericSystem with a position command: the state mirrors the command."""

    has_velocity_state = False

    def __init__(self, q0):
        """Start at q0 (n,)."""
        self.q = np.array(q0, dtype=float)
        self.v = np.zeros_like(self.q)

    def write(self, command, dt: float) -> None:
        """Take the position command; the next read returns it (velocity state stays 0)."""
        self.q = np.array(command, dtype=float)

    def idle(self, dt: float) -> None:
        """Hold the state for a period with no command written."""


class LagServo:
    """A position servo: first-order lag of time constant tau (s) toward the command."""

    has_velocity_state = True

    def __init__(self, q0, tau: float):
        """Start at rest at q0 (n,)."""
        self.q = np.array(q0, dtype=float)
        self.v = np.zeros_like(self.q)
        self.tau = float(tau)
        self.command = self.q.copy()

    def write(self, command, dt: float) -> None:
        """Take the position command and move toward it for one period dt."""
        self.command = np.array(command, dtype=float)
        self.idle(dt)

    def idle(self, dt: float) -> None:
        """Move toward the last command for dt (exact for a command held over dt)."""
        keep = math.exp(-dt / self.tau)
        new = self.command + (self.q - self.command) * keep
        self.v = (new - self.q) / dt
        self.q = new


def _spline(ta, a, tb, b, t):
    """(q, v, a) at t between states a and b (dicts p, v, acc with lists or None), per JTC rules.

    Degree by the fields present at both ends: linear, cubic (velocities) or
    quintic (velocities and accelerations); outside [ta, tb] the time is
    clamped and the derivative terms dropped, as the controller does.
    Accelerations without velocities leave the output at zero (as upstream).
    """
    has_v = a['v'] is not None and b['v'] is not None
    has_a = a['acc'] is not None and b['acc'] is not None
    span = tb - ta
    s = t - ta
    if s < 0.0:
        s, has_v, has_a = 0.0, False, False
    if s > span:
        s, has_v, has_a = span, False, False
    p0, p1 = np.asarray(a['p'], float), np.asarray(b['p'], float)
    n = len(p0)
    if not has_v and not has_a:
        slope = (p1 - p0) / span if span != 0.0 else np.zeros(n)
        return p0 + slope * s, slope, np.zeros(n)
    if has_v and not has_a:
        rows = [[1, 0, 0, 0], [0, 1, 0, 0], [1, span, span ** 2, span ** 3],
                [0, 1, 2 * span, 3 * span ** 2]]
        rhs = np.array([p0, a['v'], p1, b['v']], dtype=float)
    elif has_v and has_a:
        rows = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 2, 0, 0, 0],
                [1, span, span ** 2, span ** 3, span ** 4, span ** 5],
                [0, 1, 2 * span, 3 * span ** 2, 4 * span ** 3, 5 * span ** 4],
                [0, 0, 2, 6 * span, 12 * span ** 2, 20 * span ** 3]]
        rhs = np.array([p0, a['v'], a['acc'], p1, b['v'], b['acc']], dtype=float)
    else:
        return np.zeros(n), np.zeros(n), np.zeros(n)
    if span == 0.0:
        return p0.copy(), np.zeros(n), np.zeros(n)
    c = np.linalg.solve(np.array(rows, dtype=float), rhs)
    k = np.arange(len(c))
    q = (s ** k) @ c
    v = (k[1:] * s ** (k[1:] - 1)) @ c[1:]
    acc = (k[2:] * (k[2:] - 1) * s ** (k[2:] - 2)) @ c[2:]
    return q, v, acc


def _state(point: Point):
    return {'p': list(point.positions), 'v': list(point.velocities) or None,
            'acc': list(point.accelerations) or None}


class TrajectoryController:
    """joint_trajectory_controller on a position interface, fed by its topic (module docstring).

    Args:
        joints: the controller's joint names (its order).
        rate: update rate, Hz.
        hardware: MockHardware or LagServo.
        interpolate_from_desired_state: the parameter (default false).
        allow_nonzero_velocity_at_trajectory_end: the parameter (default false).

    """

    def __init__(self, joints, rate: float, hardware, *,
                 interpolate_from_desired_state: bool = False,
                 allow_nonzero_velocity_at_trajectory_end: bool = False):
        """Start holding the hardware's position (no trajectory yet)."""
        self.joints = list(joints)
        self.period = 1.0 / rate
        self.hw = hardware
        self.from_desired = interpolate_from_desired_state
        self.allow_nonzero_end = allow_nonzero_velocity_at_trajectory_end
        self.rejected: List[str] = []
        self.accepted = 0
        self._pending: Optional[Trajectory] = None
        self._current: Optional[Trajectory] = None
        self._sampled = False
        self._start = 0.0
        self._before = None
        self._before_time = 0.0
        self._traj_time = 0.0
        self._last_cmd = None
        self._last_cmd_time = 0.0
        self._last_update: Optional[float] = None
        self.commands: List[np.ndarray] = []   # what each update wrote (None: nothing)
        self.times: List[float] = []

    # -- the subscriber callback ------------------------------------------------------

    def receive(self, msg: Trajectory, now: float) -> bool:
        """Validate ``msg`` on the controller's clock ``now``; keep it for the next update."""
        reason = self._invalid(msg, now)
        if reason:
            self.rejected.append(reason)
            return False
        self.accepted += 1
        self._pending = msg
        return True

    def _invalid(self, msg: Trajectory, now: float) -> str:
        n = len(msg.joint_names)
        if n != len(self.joints):
            return "joints on incoming trajectory don't match the controller joints"
        if not msg.points:
            return 'empty trajectory'
        if any(name not in self.joints for name in msg.joint_names):
            return "an incoming joint doesn't match the controller's joints"
        if not self.allow_nonzero_end and \
                any(abs(v) > FLOAT_EPS for v in msg.points[-1].velocities):
            return 'velocity of last trajectory point is not zero'
        if msg.stamp != 0.0 and msg.stamp + msg.points[-1].time_from_start < now:
            return 'trajectory with non-zero start time ends in the past'
        for i, p in enumerate(msg.points):
            if i > 0 and p.time_from_start <= msg.points[i - 1].time_from_start:
                return 'time between points is not strictly increasing'
            if len(p.positions) != n or (p.velocities and len(p.velocities) != n) or \
                    (p.accelerations and len(p.accelerations) != n):
                return f'mismatch between joint_names size and a field at point #{i}'
        return ''

    # -- the update loop ---------------------------------------------------------------

    def _local(self, msg: Trajectory) -> Trajectory:
        """Return the message in the controller's joint order."""
        index = [msg.joint_names.index(j) for j in self.joints]

        def order(values):
            return [values[k] for k in index] if values else []
        return Trajectory(list(self.joints), msg.stamp, [
            Point(p.time_from_start, order(p.positions), order(p.velocities),
                  order(p.accelerations)) for p in msg.points])

    def update(self, time: float) -> Optional[np.ndarray]:
        """Run one control cycle at ``time``: take a new message, sample, write; return it."""
        if self._pending is not None:
            self._current, self._pending = self._local(self._pending), None
            self._sampled = False
        written = None
        if self._current is not None:
            if not self._sampled:
                self._first_sample(time)
            else:
                # The controller manager passes the measured period since the last update.
                self._traj_time += time - self._last_update if self._last_update is not None \
                    else self.period
            state = self._sample(self._traj_time + self.period)
            if state is not None:
                written = state
                self._last_cmd, self._last_cmd_time = state, time
        self._last_update = time
        if written is not None:
            self.hw.write(written[0], self.period)
        else:
            self.hw.idle(self.period)
        self.commands.append(None if written is None else written[0].copy())
        self.times.append(time)
        return None if written is None else written[0]

    def _first_sample(self, time: float) -> None:
        traj = self._current
        if self.from_desired and self._last_cmd is not None:
            q, v, a = self._last_cmd
            self._before = {'p': list(q), 'v': list(v), 'acc': list(a)}
            self._before_time = self._last_cmd_time
        else:
            measured_v = list(self.hw.v) if self.hw.has_velocity_state else None
            self._before = {'p': list(self.hw.q), 'v': measured_v, 'acc': None}
            self._before_time = time
        first = traj.points[0]
        if self._before['v'] is None and first.velocities:
            self._before['v'] = [0.0] * len(self.joints)
        if self._before['acc'] is None and first.accelerations:
            self._before['acc'] = [0.0] * len(self.joints)
        self._traj_time = time
        self._start = traj.stamp if traj.stamp != 0.0 else time
        self._sampled = True

    def _sample(self, t: float):
        """(q, v, a) of the current trajectory at t (None before the state it started from)."""
        traj = self._current
        if t < self._before_time:
            return None
        first_t = self._start + traj.points[0].time_from_start
        if t < first_t:
            return _spline(self._before_time, self._before, first_t, _state(traj.points[0]), t)
        for a, b in zip(traj.points[:-1], traj.points[1:]):
            ta, tb = self._start + a.time_from_start, self._start + b.time_from_start
            if ta <= t < tb:
                return _spline(ta, _state(a), tb, _state(b), t)
        last = traj.points[-1]
        n = len(self.joints)
        return (np.array(last.positions, float),
                np.array(last.velocities or [0.0] * n, float),
                np.array(last.accelerations or [0.0] * n, float))


class ForwardController:
    """forward_position_controller: newest array each update (module docstring)."""

    def __init__(self, joints, rate: float, hardware):
        """Start with no command (the array is all NaN until a message comes)."""
        self.joints = list(joints)
        self.period = 1.0 / rate
        self.hw = hardware
        self.active = True
        self._newest: Optional[List[float]] = None
        self._command = [math.nan] * len(self.joints)
        self.commands: List[Optional[np.ndarray]] = []
        self.times: List[float] = []

    def receive(self, data, now: float) -> bool:
        """Keep the newest array, as the subscriber does (no validation here, as upstream)."""
        self._newest = list(data)
        return True

    def update(self, time: float) -> Optional[np.ndarray]:
        """One control cycle: write the newest array (if any, of the right size)."""
        written = None
        if self.active:
            if self._newest is not None:
                self._command, self._newest = self._newest, None
            if not all(math.isnan(v) for v in self._command):
                if len(self._command) != len(self.joints):
                    self.active = False   # update() returned ERROR: deactivated
                else:
                    written = np.array(self._command, dtype=float)
        if written is not None:
            self.hw.write(written, self.period)
        else:
            self.hw.idle(self.period)
        self.commands.append(written)
        self.times.append(time)
        return written


def derivatives(commands, period: float):
    """Velocity, acceleration and jerk (k, n) of written commands at a fixed period (differences).

    Ticks with nothing written count as the previous command held (the
    hardware holds it).
    """
    held, last = [], None
    for c in commands:
        last = c if c is not None else last
        if last is not None:
            held.append(last)
    q = np.array(held, dtype=float)
    v = np.diff(q, axis=0) / period
    a = np.diff(v, axis=0) / period
    j = np.diff(a, axis=0) / period
    return q, v, a, j
