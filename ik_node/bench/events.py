# SPDX-License-Identifier: Apache-2.0

"""``ik_bench events``: what reaches the hardware when something goes wrong mid-motion.

The node's loop in plain Python, closed around a lagging servo through a
controller stand-in (ik_node.bench.standins): every 10 ms a tick
(MotionSession.tick, the node's motion step, then the message as the node
builds it), position arrays at the controller's rate while the arrays flow,
joint states at 250 Hz stamped on the node's clock and arriving 2 ms later.
Mid-motion one event: a bad joint state (a +1 rad glitch, a duplicated
name, NaN, beyond a limit, a state stamped 60 ms late), feedback lost for
0.5 s, the node stalled 0.3 s (no tick, no array), the clock set back 10 s
or forward 5 s (the controller on the same clock), a parameter change
(acceleration limit 5 -> 0.01 rad/s^2, tip speed 0.001 m/s for 0.5 s, jerk
limit 500 -> 50 rad/s^3), a new model of the same arm. Reported per event
and output: the peak command speed, acceleration and jerk the controller
wrote (differences on its real-time grid) over the limits in force before
the event, the re-syncs, the states rejected, whether the last command
reached the target (within 0.1 mm). No DDS.
"""

from dataclasses import replace
import math
from typing import Dict, List, Optional

from ik_node.bench.common import machine_info, print_json, print_table, print_title
from ik_node.bench.feedback import iiwa14
from ik_node.bench.standins import derivatives, ForwardController, LagServo, Point, \
    Trajectory, TrajectoryController
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.carry import carried_over
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.stream import controller_lead
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.poses import pose_error
import numpy as np

Q0 = np.array([0.1, 0.6, -0.1, -1.3, 0.2, 0.8, 0.3])
GOAL = Q0 + np.array([0.6, -0.4, 0.5, 0.5, -0.6, 0.4, 0.6])
PERIOD, RATE, LATENCY, BUDGET, JERK, ACCEL = 0.01, 500.0, 0.005, 0.03, 500.0, 5.0
STATE_EVERY = 2          # controller ticks between joint states (250 Hz)
EVENT_AT = 0.5           # s after the start; the move starts at 0.1 s
EVENTS = ('none', 'glitch +1 rad', 'duplicated name', 'NaN', 'beyond a limit',
          'stamped 60 ms late', 'feedback lost 0.5 s', 'node stalled 0.3 s',
          'clock back 10 s', 'clock forward 5 s', 'acceleration 5 -> 0.01',
          'tip speed 0.001 for 0.5 s', 'jerk 500 -> 50', 'new model, same arm')


class Loop:
    """One closed loop: node (tracker, stream, policy), controller, servo, clocks."""

    def __init__(self, chain: Chain, output: str, tau: float):
        """Start everything at rest at Q0 (real time and the node's clock both 0)."""
        self.chain, self.output = chain, output
        self.config = TrackerConfig(max_joint_acceleration=ACCEL)
        tracker = MotionTracker(chain, make_solver(chain, 'auto'), self.config, Q0, 0.0)
        self.policy = FeedbackPolicy(chain.joint_names, chain.lower, chain.upper,
                                     chain.velocity, timeout=0.1, tolerance=0.1,
                                     servo_lag=0.15)
        # The node's own motion step: the session owns the tick.
        self.session = MotionSession(tracker, PERIOD, controller_lead(PERIOD, BUDGET), JERK,
                                     budget_s=BUDGET, feedback=self.policy)
        self.servo = LagServo(Q0, tau)
        controller = TrajectoryController if output == 'joint_trajectory' else \
            ForwardController
        self.controller = controller(chain.joint_names, RATE, self.servo)
        self.offset = 0.0     # node clock - real time, s
        self.inbox: List = []   # (real arrival time, message)
        self.states: List = []   # (real arrival time, names, q, v, stamp)

    def clock(self, real: float) -> float:
        """Return the node's (and the controller's) clock at real time ``real``, s."""
        return real + self.offset

    def measure(self, real: float, event: str, due: bool) -> None:
        """Queue the servo's state, stamped now, arriving 2 ms later (the event's if due)."""
        names = list(self.chain.joint_names)
        q, v = self.servo.q.tolist(), self.servo.v.tolist()
        stamp = self.clock(real)
        if due and event == 'glitch +1 rad':
            q[3] += 1.0
        elif due and event == 'duplicated name':
            names[1], q[1] = names[0], q[0] + 0.5
        elif due and event == 'NaN':
            q[2] = math.nan
        elif due and event == 'beyond a limit':
            q[4] = self.chain.upper[4] + 0.5
        elif due and event == 'stamped 60 ms late':
            stamp -= 0.06
            q = (self.servo.q - 0.06 * self.servo.v).tolist()
        self.states.append((real + 0.002, names, q, v, stamp))

    def deliver(self, real: float) -> None:
        """Hand states and messages due by ``real`` to the policy and the controller."""
        while self.states and self.states[0][0] <= real + 1e-12:
            _, names, q, v, stamp = self.states.pop(0)
            self.session.measured(names, q, v, stamp, self.clock(real))
        for item in [m for m in self.inbox if m[0] <= real + 1e-12]:
            self.inbox.remove(item)
            self.controller.receive(item[1], self.clock(item[0]))

    def tick(self, real: float) -> None:
        """One node tick: the session's motion step, then the message goes out."""
        now = self.clock(real)
        if not self.session.tick(now).planned:
            return
        if self.output == 'joint_trajectory':
            points = self.session.plan.horizon(now)
            start = points[0].time
            self.inbox.append((real + LATENCY, Trajectory(
                list(self.chain.joint_names), start,
                [Point(p.time - start, list(p.q), list(p.v), list(p.a)) for p in points])))

    def send_array(self, real: float) -> None:
        """position_array: the plan at this instant, once the arrays flow."""
        if self.output == 'position_array' and self.policy.started:
            self.inbox.append((real + LATENCY,
                               list(self.session.plan.send(self.clock(real)))))


def run_event(chain: Chain, output: str, event: str, tau: float = 0.05,
              seconds: float = 10.0, at: float = EVENT_AT) -> Dict[str, object]:
    """Run one event at ``at`` s (the move starts at 0.1 s) on one output; return its row."""
    loop = Loop(chain, output, tau)
    dt = 1.0 / RATE
    ticks_per_node = int(round(PERIOD / dt))
    target_sent = changed_back = False
    for k in range(int(round(seconds / dt))):
        real = k * dt
        due = at <= real < at + dt - 1e-12
        _apply_event(loop, event, real, due, dt)
        if event == 'tip speed 0.001 for 0.5 s' and not changed_back and \
                real >= at + 0.5:
            changed_back = True
            loop.session.configure(loop.clock(real), config=loop.config)
        lost = event == 'feedback lost 0.5 s' and at <= real < at + 0.5
        if k % STATE_EVERY == 0 and not lost:
            loop.measure(real, event, due)
        loop.deliver(real)
        stalled = event == 'node stalled 0.3 s' and at <= real < at + 0.3
        if not stalled and k % ticks_per_node == 0:
            if not target_sent and real >= 0.1:
                target_sent = True
                loop.session.target(loop.clock(real), chain.forward(GOAL))
            loop.tick(real)
        if not stalled:
            loop.send_array(real)
        loop.controller.update(loop.clock(real))
    return _row(loop, output, event, dt)


def _apply_event(loop: Loop, event: str, real: float, due: bool, dt: float) -> None:
    """Apply a clock, parameter or model event at its instant."""
    if not due:
        return
    now, session = loop.clock(real), loop.session
    if event == 'clock back 10 s':
        loop.offset -= 10.0
    elif event == 'clock forward 5 s':
        loop.offset += 5.0
    elif event == 'acceleration 5 -> 0.01':
        session.configure(now, config=replace(loop.config, max_joint_acceleration=0.01))
    elif event == 'tip speed 0.001 for 0.5 s':
        session.configure(now, config=replace(loop.config, max_linear_speed=0.001,
                                              max_angular_speed=0.001))
    elif event == 'jerk 500 -> 50':
        session.configure(now, jerk=50.0)
    elif event == 'new model, same arm':
        chain = iiwa14()
        tracker = carried_over(session.tracker, chain, make_solver(chain, 'auto'), Q0,
                               session.tracker.time)
        session.use_model(tracker, JERK, loop.policy)
        session.target(now, chain.forward(GOAL))


def _row(loop: Loop, output: str, event: str, dt: float) -> Dict[str, object]:
    _, v, a, j = derivatives(loop.controller.commands, dt)
    chain = loop.chain
    last = next(c for c in reversed(loop.controller.commands) if c is not None)
    tip, goal = chain.forward(last), chain.forward(GOAL)   # the command: the servo converges
    reached = float(np.linalg.norm(tip[:3, 3] - goal[:3, 3]))
    return {'output': output, 'event': event,
            'speed_over_limit': float(np.max(np.abs(v) / chain.velocity, initial=0.0)),
            'accel_over_limit': float(np.max(np.abs(a) / ACCEL, initial=0.0)),
            'jerk_over_limit': float(np.max(np.abs(j) / JERK, initial=0.0)),
            'resyncs': loop.policy.resyncs,
            'rejected': int(sum(loop.policy.filter.rejected.values())),
            'reached': reached < 1e-4, 'final_error_m': reached,
            'stream_clock_jumps_back': loop.session.plan.clock_jumps_back}


TWISTS = ((0.3, 0.0), (0.9, 0.0), (0.0, 2.5), (0.9, 2.5))   # (m/s, rad/s) asked


def twist_tip_speeds(chain: Chain, linear: float, angular: float, seconds: float = 1.0,
                     direction=(0.6, 0.0, -0.8), axis=(0.0, 0.0, 1.0),
                     body: bool = False) -> Dict[str, float]:
    """Peak tip speeds over the limits (0.5 m/s, 1 rad/s) under a 100 Hz twist stream.

    The twist (``linear`` m/s along the unit ``direction``, ``angular`` rad/s
    about the unit ``axis``; base frame, or tip frame with ``body``) goes to
    the tracker every 10 ms as the node passes it on; the tip speed is the
    commanded tip's motion between the stream's samples 2 ms apart
    (positions: metres; rotation: the angle of the relative rotation).
    """
    config = TrackerConfig(max_joint_acceleration=ACCEL)
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), config, Q0, 0.0)
    session = MotionSession(tracker, PERIOD, controller_lead(PERIOD, BUDGET), JERK,
                            budget_s=BUDGET)
    lin, ang = linear * np.asarray(direction, float), angular * np.asarray(axis, float)
    poses, dt = [], 1.0 / RATE
    for k in range(int(round(seconds / dt))):
        now = k * dt
        if k % int(round(PERIOD / dt)) == 0:
            session.twist(now, lin, ang, body)
            session.tick(now)
        poses.append(chain.forward(session.plan.send(now)))
    v, w = np.array([pose_error(a, b) for a, b in zip(poses, poses[1:])]).T / dt
    return {'linear_asked': linear, 'angular_asked': angular,
            'linear_over_limit': float(v.max()) / config.max_linear_speed,
            'angular_over_limit': float(w.max()) / config.max_angular_speed,
            'scaled': tracker.twists.scaled}


def add_parser(subparsers):
    """Register the ``events`` subcommand."""
    p = subparsers.add_parser('events', help='peak command acceleration and jerk across '
                              'glitches, pauses, stalls, clock jumps, parameter changes')
    p.add_argument('--outputs', nargs='+', default=['position_array', 'joint_trajectory'],
                   choices=['position_array', 'joint_trajectory'])
    p.add_argument('--events', nargs='+', default=list(EVENTS), choices=EVENTS)
    p.add_argument('--tau', type=float, default=0.05, help="the servo's time constant, s")
    p.set_defaults(func=run)


def run(args):
    """Run every event on every output; print a table (or one JSON object)."""
    chain = iiwa14()
    rows = [run_event(chain, output, event, args.tau) for output in args.outputs
            for event in args.events]
    twists = [twist_tip_speeds(chain, lin, ang) for lin, ang in TWISTS]
    report = {'benchmark': 'events', 'machine': machine_info(), 'tau_s': args.tau,
              'rows': rows, 'twists': twists}
    if args.json:
        print_json(report)
        return 0
    print_title('events', f'iiwa14; {RATE:g} Hz controller, {LATENCY * 1e3:g} ms latency, '
                f'servo time constant {args.tau:g} s; limits 5 rad/s^2, 500 rad/s^3',
                report['machine'])
    print_table(['output', 'event', 'speed / limit', 'accel / limit', 'jerk / limit',
                 're-syncs', 'states rejected', 'target reached'],
                [(r['output'], r['event'], _fmt(r['speed_over_limit']),
                  _fmt(r['accel_over_limit']), _fmt(r['jerk_over_limit']), r['resyncs'],
                  r['rejected'], 'yes' if r['reached'] else
                  f"no ({1e3 * r['final_error_m']:.3g} mm away)") for r in rows])
    print('\ntwists at 100 Hz against max_linear_speed 0.5 m/s, max_angular_speed 1 rad/s:')
    print_table(['asked m/s', 'asked rad/s', 'tip speed / limit', 'tip rotation / limit',
                 'twists scaled'],
                [(f"{t['linear_asked']:g}", f"{t['angular_asked']:g}",
                  _fmt(t['linear_over_limit']), _fmt(t['angular_over_limit']), t['scaled'])
                 for t in twists])
    return 0


def _fmt(value: Optional[float]) -> str:
    return '-' if value is None else f'{value:.3f}'
