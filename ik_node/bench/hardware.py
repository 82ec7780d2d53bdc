# SPDX-License-Identifier: Apache-2.0

"""The node's command stream through emulated ros2_control controllers to hardware, no DDS.

One simulated run: the motion tracker and the command stream as the node
runs them (a tick every period, the same messages it builds), each message
delivered to the controller stand-in (:mod:`ik_node.bench.standins`) a fixed
latency later on the shared clock, the controller updated at its own rate,
writing to mock hardware or a lagging servo. What the controller writes is
recorded: that is what the arm feels.

``legacy=True`` sends the stream of the previous release instead (one point
per message at ``stamp + period``, positions and velocities, no jerk stage,
``allow_nonzero_velocity_at_trajectory_end: true``), for comparison.
"""

from dataclasses import dataclass, field
import math
import time as _time
from typing import Callable, Dict, List, Optional

from ik_node.bench.standins import derivatives, ForwardController, LagServo, MockHardware, \
    Point, Trajectory, TrajectoryController
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.stream import CommandStream, controller_lead
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.description.urdf import bundled_urdf
import numpy as np

ARMS = {
    'iiwa14': ('iiwa14.urdf', 'iiwa_link_0', 'tool0',
               [0.1, 0.6, -0.1, -1.3, 0.2, 0.8, 0.3], [500.0] * 7, [5.0] * 7),
    # Franka's published jerk limits; accelerations at the node's default (within Franka's).
    'panda': ('panda.urdf', 'panda_link0', 'tool0',
              [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398],
              [7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0], [5.0] * 7),
}
SCENARIOS = ('move', 'figure8', 'twist', 'kill')


@dataclass
class Run:
    """What reached the hardware in one run, and the limits it is judged by."""

    period: float                    # the controller's
    commands: List[Optional[np.ndarray]]
    times: List[float]
    servo_q: List[np.ndarray]
    v_max: np.ndarray
    a_max: np.ndarray
    j_max: np.ndarray
    rejected: List[str] = field(default_factory=list)
    messages: int = 0
    kill_time: Optional[float] = None
    added_delay_s: float = 0.0
    next_twist: float = 0.0          # the twist scenario's next 50 Hz send
    tick_seconds: List[float] = field(default_factory=list)   # planning + message, per tick
    arrays_sent: int = 0             # position_array: arrays the node sent
    arrays_received_at: List[int] = field(default_factory=list)   # update index of each arrival

    def array_ticks(self) -> Dict[str, float]:
        """position_array: the share of controller updates that got no new array / several.

        ``reused``: updates (after the first array) that found no new array and
        wrote the previous one again; ``skipped``: updates that found more than
        one new array (all but the newest never written).
        """
        if not self.arrays_received_at:
            return {'reused': 0.0, 'skipped': 0.0}
        first = self.arrays_received_at[0]
        counts = np.bincount(np.array(self.arrays_received_at) - first,
                             minlength=len(self.commands) - first)
        return {'reused': float(np.mean(counts == 0)), 'skipped': float(np.mean(counts > 1))}

    def derivatives(self):
        """(q, v, a, j) of the written commands by differences at the controller's period."""
        return derivatives(self.commands, self.period)

    def peak_ratios(self) -> Dict[str, float]:
        """Largest |v| / v_max, |a| / a_max, |j| / j_max over joints and ticks."""
        _, v, a, j = self.derivatives()
        if j.size == 0:   # fewer than four commands written
            return {'speed': 0.0, 'accel': 0.0, 'jerk': 0.0}
        return {'speed': float(np.max(np.abs(v) / self.v_max, initial=0.0)),
                'accel': float(np.max(np.abs(a) / self.a_max, initial=0.0)),
                'jerk': float(np.max(np.abs(j) / self.j_max, initial=0.0))}

    def stalled_ticks(self, moving: float = 1e-3, within_s: float = 0.05) -> int:
        """Ticks whose command did not move while the arm moved within ``within_s`` on both sides.

        Moving: some joint faster than ``moving`` rad/s (differences of the commands).
        """
        _, v, _, _ = self.derivatives()
        speed = np.max(np.abs(v), axis=1) if len(v) else np.zeros(0)
        span = max(1, int(round(within_s / self.period)))
        still = speed * self.period < 1e-12
        moves = speed > moving
        count = 0
        for k in np.flatnonzero(still):
            if moves[max(0, k - span):k].any() and moves[k + 1:k + 1 + span].any():
                count += 1
        return count

    def reaction_s(self, since: float = 0.1) -> Optional[float]:
        """Seconds from ``since`` (the scenarios' first input) to the first command that moves."""
        first = next((c for c in self.commands if c is not None), None)
        for t, c in zip(self.times, self.commands):
            if c is not None and first is not None and np.max(np.abs(c - first)) > 1e-9:
                return t - since
        return None

    def tracking_error(self) -> float:
        """Largest |servo position - command| over the run, rad."""
        held = [c for c in self.commands if c is not None]
        if not held:
            return 0.0
        errors = [np.max(np.abs(s - c)) for s, c in zip(self.servo_q, self.commands)
                  if c is not None]
        return float(max(errors))


def _targets(chain: Chain, q0, scenario: str):
    """(time, 4x4 pose) targets of a scenario, base frame, from the arm's start pose."""
    start = chain.forward(np.asarray(q0, float))
    if scenario in ('move', 'kill'):
        pose = start.copy()
        pose[:3, 3] += [0.12, -0.1, -0.12]
        return [(0.1, pose)]
    if scenario == 'figure8':
        out = []
        for k in range(int(3.0 * 20)):
            t = 0.1 + k / 20.0
            pose = start.copy()
            s = 2 * math.pi * t / 3.0
            pose[:3, 3] += [0.0, 0.1 * math.sin(s), 0.06 * math.sin(2 * s)]
            out.append((t, pose))
        return out
    return []


def _twist(t: float):
    """(linear m/s, angular rad/s) of the twist scenario at t: 1.2 s of a turning push."""
    if 0.1 <= t < 1.3:
        return [0.15 * math.cos(2.0 * t), 0.15 * math.sin(2.0 * t), 0.05], [0.0, 0.0, 0.3]
    return None


def simulate(arm: str = 'iiwa14', scenario: str = 'move', output: str = 'joint_trajectory',
             controller_rate: float = 500.0, latency: float = 0.005, servo_tau: float = 0.0,
             duration: float = 3.0, period: float = 0.01, budget: float = 0.03,
             legacy: bool = False, kill_at: float = 0.5, jitter: float = 0.0,
             stall: Optional[tuple] = None, seed: int = 0, stage: str = 'fir',
             on_tick: Optional[Callable] = None, clock_offset: float = 0.0,
             array_rate: Optional[float] = None, array_jitter: float = 0.0,
             controller_phase: float = 0.0, controller_jitter: float = 0.0,
             array_sample: str = 'due', window: str = 'budget') -> Run:
    """Run the node's stream through a controller stand-in; return what the hardware got.

    Args:
        arm: 'iiwa14' or 'panda'.
        scenario: 'move' (one 0.2 m target), 'figure8' (targets at 20 Hz),
            'twist' (a 50 Hz twist stream for 1.2 s), 'kill' (the move, the
            node silent from ``kill_at`` on).
        output: 'joint_trajectory' or 'position_array' (published at the
            controller's rate, sampled from the committed plan).
        controller_rate: Hz.
        latency: seconds from publish to receipt.
        servo_tau: 0 for mock hardware, else a lagging servo's time constant, s.
        duration: simulated seconds.
        period: the node's period, s.
        budget: its latency budget, s.
        legacy: the previous release's stream (module docstring).
        kill_at: with the 'kill' scenario, when the node goes silent, s.
        seed: of the jitter's random numbers.
        stage: 'fir' (the node's jerk stage) or 'ruckig' (Ruckig online after
            the limiting step, as MoveIt Servo smooths: for comparison).
        on_tick: called as on_tick(time, tracker, stream) after each node tick.
        jitter: each node tick comes up to this much late (uniform, seeded), s.
        stall: (start, length) s: the node runs no tick in that window (a
            busy machine), then one tick.
        clock_offset: the controller's clock minus the node's, s (negative:
            behind, a robot computer whose clock lags the workstation's). The
            controller validates and samples on its clock; stamps are the node's.
        array_rate: position_array: the node's array timer, Hz (its
            controller_rate parameter; None: the controller's rate).
        array_jitter: position_array: each array timer callback comes up to
            this much late (uniform, seeded: the process scheduler of a busy
            machine), s; a callback later than a period skips the periods it
            missed, as an rcl timer does.
        controller_phase: the controller's first update, s after the node's
            first tick (its own loop: not in step with the node's timer).
        controller_jitter: each controller update comes up to this much late, s.
        array_sample: 'due' (the node: each array samples the plan at the
            instant its timer callback was due) or 'actual' (at the instant it
            ran, as before issue 29: for comparison).
        window: joint_trajectory: 'budget' (the node: each message starts at
            the committed point at or before now - budget) or 'now' (at or
            before now, as before issue 29: for comparison).

    """
    urdf, base, tip, q0, jerk, accel = ARMS[arm]
    chain = Chain.from_urdf_file(bundled_urdf(urdf), base, tip)
    config = TrackerConfig(joint_acceleration_limits=tuple(accel))
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), config, q0, 0.0)
    lead = controller_lead(period, budget)
    kwargs = {}
    if stage == 'ruckig':
        from ik_node.bench.ruckig_stage import ruckig_stage
        kwargs['stage'] = ruckig_stage(chain.velocity, accel, jerk)
    stream = None if legacy else CommandStream(tracker, period, lead, jerk, budget_s=budget,
                                               **kwargs)
    hardware = LagServo(q0, servo_tau) if servo_tau > 0.0 else MockHardware(q0)
    names = chain.joint_names
    if output == 'joint_trajectory':
        controller = TrajectoryController(names, controller_rate, hardware,
                                          allow_nonzero_velocity_at_trajectory_end=legacy)
    else:
        controller = ForwardController(names, controller_rate, hardware)
    run = Run(1.0 / controller_rate, [], [], [], chain.velocity.copy(), np.array(accel),
              np.array(jerk), kill_time=kill_at if scenario == 'kill' else None,
              added_delay_s=0.0 if stream is None else lead + stream.delay_s)
    targets = _targets(chain, q0, scenario)
    inbox: List = []     # (arrival time, message)
    ticks = _tick_times(duration, period, jitter, stall, seed)
    rng = np.random.default_rng(seed + 1)
    dt_c = 1.0 / controller_rate
    sends = [] if output != 'position_array' else _timer_times(
        duration, 1.0 / (array_rate or controller_rate), array_jitter, rng)
    for k in range(int(round(duration * controller_rate))):
        now = controller_phase + k * dt_c + (rng.uniform(0.0, controller_jitter)
                                             if controller_jitter > 0.0 else 0.0)
        alive = run.kill_time is None or now < run.kill_time
        # The node's ticks and its array timer, in time order, up to this update.
        while (alive and ticks and ticks[0] <= now + 1e-12) or \
                (sends and sends[0][0] <= now + 1e-12):
            if alive and ticks and ticks[0] <= now + 1e-12 and \
                    (not sends or ticks[0] <= sends[0][0]):
                tick = ticks.pop(0)
                _node_tick(tick, tracker, stream, targets, scenario, output, period, names,
                           inbox, latency, legacy, run, window)
                if on_tick is not None:
                    on_tick(tick, tracker, stream)
                continue
            sent, due = sends.pop(0)
            if _array_tick(sent, run, stream, stall):
                q = tracker.q if stream is None else stream.send(
                    sent, due if array_sample == 'due' else None)
                inbox.append((sent + latency, list(q)))
                run.arrays_sent += 1
        for item in sorted([m for m in inbox if m[0] <= now + 1e-12], key=lambda m: m[0]):
            inbox.remove(item)
            if controller.receive(item[1], item[0] + clock_offset) is False:
                continue
            run.arrays_received_at.append(len(run.commands))
        controller.update(now + clock_offset)
        run.commands.append(controller.commands[-1])
        run.times.append(now)
        run.servo_q.append(hardware.q.copy())
    if output == 'joint_trajectory':
        run.rejected = list(controller.rejected)
    return run


def _array_tick(t, run, stream, stall) -> bool:
    """Whether the node's array timer publishes at t: after its first tick, not in a stall.

    Killed (SIGINT), the node plays its braking tail on this timer before it
    exits (ik_node.ros.node does the same); the legacy stream just stops.
    """
    if stream is None or not run.messages or \
            (stall is not None and stall[0] <= t < stall[0] + stall[1]):
        return False   # the previous release sent its arrays from its tick
    if run.kill_time is None or t < run.kill_time:
        return True
    tail = stream.tail()
    return bool(tail) and t <= tail[-1].time


def _timer_times(duration: float, period: float, lateness: float, rng) -> List[tuple]:
    """Return (instant, due instant) of each callback of a timer of ``period`` s that runs late.

    Each callback comes up to ``lateness`` s after its due time (uniform);
    as in rcl, the next due time is the first multiple of the period after
    the callback started: periods missed meanwhile are skipped, not caught up.
    """
    times, due = [], 0.0
    while due <= duration:
        t = due + (rng.uniform(0.0, lateness) if lateness > 0.0 else 0.0)
        times.append((t, due))
        due = period * (math.floor(t / period + 1e-9) + 1)
    return times


def _tick_times(duration, period, jitter, stall, seed) -> List[float]:
    """Return the node's tick instants: every period, up to ``jitter`` late, none in a stall."""
    rng = np.random.default_rng(seed)
    times, last = [], -math.inf
    for k in range(int(duration / period) + 1):
        t = k * period + (rng.uniform(0.0, jitter) if jitter > 0.0 else 0.0)
        if stall is not None and stall[0] <= t < stall[0] + stall[1]:
            t = stall[0] + stall[1]
        if t > last:
            times.append(t)
            last = t
    return times


def _node_tick(now, tracker, stream, targets, scenario, output, period, names, inbox, latency,
               legacy, run, window='budget'):
    """One node tick: inputs due, then the command(s) and the message, as the node does."""
    plan_now = now + (0.0 if stream is None else stream.lead_s)
    while targets and targets[0][0] <= now + 1e-12:
        tracker.add_target(plan_now, targets.pop(0)[1])
    if scenario == 'twist' and now >= run.next_twist:
        run.next_twist += 0.02 * (1 + int((now - run.next_twist) / 0.02))
        twist = _twist(now)
        if twist is not None:
            tracker.set_twist(plan_now, *twist)
        elif tracker.teleoperating:
            tracker.set_twist(plan_now, [0.0] * 3, [0.0] * 3)
    if stream is None:   # the previous release: one command per tick
        cmd = tracker.command(now)
        if output == 'joint_trajectory':
            inbox.append((now + latency, Trajectory(list(names), now, [
                Point(period, list(cmd.q), list(cmd.v))])))
        else:
            inbox.append((now + latency, list(cmd.q)))
        run.messages += 1
        return
    start_s = _time.perf_counter()
    stream.advance(now)
    run.messages += output != 'joint_trajectory'
    if output != 'joint_trajectory':
        run.tick_seconds.append(_time.perf_counter() - start_s)
    if output == 'joint_trajectory':
        points = stream.horizon(now)
        if window == 'now':   # before issue 29: from the newest point at or before now
            first = max(k for k, p in enumerate(points) if k == 0 or p.time <= now)
            points = points[first:]
        run.tick_seconds.append(_time.perf_counter() - start_s)
        start = points[0].time
        inbox.append((now + latency, Trajectory(list(names), start, [
            Point(p.time - start, list(p.q), list(p.v), list(p.a)) for p in points])))
        run.messages += 1
