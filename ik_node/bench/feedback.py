# SPDX-License-Identifier: Apache-2.0

"""``ik_bench feedback``: re-syncs from servo lag and push detection, on simulated servos.

The node's tick in plain Python (MotionSession.tick: FeedbackPolicy.decide, then
CommandStream.advance at 100 Hz, the iiwa14's analytic solver) closed around a
position servo simulated at 500 Hz that follows the command a controller plays
(the stream sampled at the servo's time) and publishes stamped states 2 ms
late. Servos: first order (time constant tau) and second order (a PD loop,
damping 1, the same lag 2 zeta / omega_n). For each servo: re-syncs over
random 0.3-0.8 rad moves (the node's rule, and the previous release's
|measured - command now| > resync_tolerance on the same runs), and the time to
detect a 0.3 rad push of a joint held there, with the arm at rest and with the
push ahead of a moving joint. No DDS.
"""

import math
import statistics

from ik_node.bench.common import machine_info, print_json, print_table, print_title
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.stream import controller_lead
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.description.urdf import bundled_urdf
import numpy as np

Q0 = np.array([0.1, 0.6, -0.1, -1.3, 0.2, 0.8, 0.3])
PERIOD = 0.01
SERVO_DT = 0.002
TOLERANCE = 0.1
SERVO_LAG = 0.15


def iiwa14() -> Chain:
    """Return the bundled iiwa14 chain (base iiwa_link_0, tip tool0)."""
    return Chain.from_urdf_file(bundled_urdf('iiwa14.urdf'), 'iiwa_link_0', 'tool0')


class Servo:
    """A position servo of one of two models; q, v (n,) its state, stepped by SERVO_DT."""

    def __init__(self, q, lag, zeta=None):
        """First order with time constant ``lag`` (zeta None), else second order of that lag."""
        self.q, self.v = np.array(q, dtype=float), np.zeros(len(q))
        self.lag, self.zeta = lag, zeta
        self.held = False   # pushed and held there (another controller took over)

    def step(self, setpoint):
        """Advance SERVO_DT toward ``setpoint`` (n,)."""
        if self.held:
            self.v[:] = 0.0
            return
        if self.zeta is None:
            old = self.q.copy()
            self.q = setpoint + (self.q - setpoint) * math.exp(-SERVO_DT / self.lag)
            self.v = (self.q - old) / SERVO_DT
            return
        wn = 2.0 * self.zeta / self.lag
        for _ in range(10):   # semi-implicit Euler, 0.2 ms substeps (wn <= 150 here)
            acc = wn * wn * (setpoint - self.q) - 2.0 * self.zeta * wn * self.v
            self.v = self.v + acc * SERVO_DT / 10
            self.q = self.q + self.v * SERVO_DT / 10


class PreviousRule(FeedbackPolicy):
    """The previous release's rule: re-sync when |measured - command now| > tolerance."""

    def disturbed(self, stream) -> bool:
        """Compare the last state with the command at its arrival (no lag model)."""
        fb = self.filter
        if fb.q is None or fb.time is None or fb.time < stream.restarted_at:
            return False
        return bool(np.max(np.abs(fb.q - stream.sample(fb.time)[0])) > self.tolerance)


class Run:
    """What one closed loop did: the policy, stream, servo, push detection delay (s or None).

    ``restart_gap``: at the push's re-sync, max |plan - measured joints|, rad
    (0: the new plan starts where the arm is).
    """

    def __init__(self, policy, stream, servo, detected, restart_gap):
        """Keep the results."""
        self.policy, self.stream, self.servo, self.detected = policy, stream, servo, detected
        self.restart_gap = restart_gap


def closed_loop(chain, servo, targets, rate, latency, seconds, push=None,
                policy_class=FeedbackPolicy, check_take=None, lost=None, on_tick=None) -> Run:
    """Run the loop; return a Run.

    targets: [(time, pose)]; push: (time, (n,) displacement): the servo is
    moved there and held (it no longer follows: a controller switched) until
    the plan re-syncs. Runs ``seconds``, and on until 1 s after the plan comes
    to rest (30 s at most). ``check_take(verdict, stamp, pushed_at)`` sees each
    state's verdict (tests assert on it). ``lost``: (start, end), s: the states
    measured in that window never arrive. ``on_tick(t, policy, stream)`` runs
    after each tick (MotionSession.tick: the policy's decision, then the plan).
    """
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), TrackerConfig(), Q0, 0.0)
    policy = policy_class(chain.joint_names, chain.lower, chain.upper, chain.velocity,
                          timeout=0.1, tolerance=TOLERANCE, servo_lag=SERVO_LAG)
    # The node's motion step: the session decides with the policy, then plans.
    session = MotionSession(tracker, PERIOD, controller_lead(PERIOD, 0.03), 500.0,
                            budget_s=0.03, feedback=policy)
    in_flight, pending = [], list(targets)
    every = max(1, int(round(1.0 / (rate * SERVO_DT))))
    tick_every = int(round(PERIOD / SERVO_DT))
    detected, k, settled_at, pushed_at, gap = None, 0, math.inf, None, None
    while k * SERVO_DT < max(seconds, settled_at + 1.0) and k * SERVO_DT < 30.0:
        k += 1
        t = k * SERVO_DT
        if push is not None and pushed_at is None and t >= push[0]:
            servo.q = np.clip(servo.q + push[1], chain.lower, chain.upper)
            servo.held, pushed_at = True, t
        servo.step(session.plan.sample(t)[0])
        if k % every == 0 and not (lost is not None and lost[0] <= t < lost[1]):
            in_flight.append((t + latency, t, servo.q.copy(), servo.v.copy()))
        while in_flight and in_flight[0][0] <= t + 1e-12:
            _, stamp, q, v = in_flight.pop(0)
            verdict = session.measured(chain.joint_names, q.tolist(), v.tolist(), stamp, t)
            if check_take is not None:
                check_take(verdict, stamp, None if detected is not None else pushed_at)
        if k % tick_every == 0:
            while pending and pending[0][0] <= t:
                session.target(t, pending.pop(0)[1])
            done = session.tick(t)
            if on_tick is not None:
                on_tick(t, policy, session.plan)
            # A re-sync: found while the states flow, or as a hold of lost ones ends.
            if done.resynced and pushed_at is not None and detected is None:
                detected = t - pushed_at
                gap = float(np.max(np.abs(session.plan.sample(t)[0] - policy.filter.q)))
                servo.held = False
            if not pending and settled_at == math.inf and \
                    tracker.trajectory.sample(t).at_rest and session.plan.at_rest():
                settled_at = t
    stream = session.plan
    return Run(policy, stream, servo, detected, gap)


def random_targets(chain, rng, count):
    """Reachable targets: FK of joints 0.3-0.8 rad from Q0 (random signs), 1.5 s apart."""
    out = []
    for i in range(count):
        delta = rng.uniform(0.3, 0.8, chain.n) * rng.choice([-1.0, 1.0], chain.n)
        q = np.clip(Q0 + delta, chain.lower + 0.1, chain.upper - 0.1)
        out.append((0.05 + 1.5 * i, chain.forward(q)))
    return out


LAGS = [0.02, 0.05, 0.1, 0.15]


def add_parser(subparsers):
    """Register the ``feedback`` subcommand."""
    p = subparsers.add_parser('feedback', help='re-syncs from servo lag, push detection')
    p.add_argument('--moves', type=int, default=3, help='random two-target runs per servo')
    p.add_argument('--rate', type=float, default=250.0, help='joint state rate, Hz')
    p.add_argument('--lags', nargs='+', type=float, default=LAGS,
                   help='servo lags, s (each as a first- and a second-order servo)')
    p.set_defaults(func=run)


def _servo_row(chain, lag, zeta, args):
    """Re-syncs (node / previous rule) and push detection (ms) for one servo model."""
    rng = np.random.default_rng(args.seed)
    resyncs = {'node': 0, 'previous': 0}
    for _ in range(args.moves):
        targets = random_targets(chain, rng, 2)
        for name, cls in (('node', FeedbackPolicy), ('previous', PreviousRule)):
            run_ = closed_loop(chain, Servo(Q0, lag, zeta), targets, args.rate, 0.002, 3.0,
                               policy_class=cls)
            resyncs[name] += run_.policy.resyncs
    at_rest, ahead = [], []
    for joint in range(chain.n):
        push = np.zeros(chain.n)
        push[joint] = 0.3 if Q0[joint] + 0.3 < chain.upper[joint] else -0.3
        at_rest.append(closed_loop(chain, Servo(Q0, lag, zeta), [], args.rate, 0.002, 1.0,
                                   push=(0.5, push)).detected)
    target = chain.forward(Q0 + np.array([0.6, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    moving = closed_loop(chain, Servo(Q0, lag, zeta), [(0.05, target)], args.rate, 0.002,
                         0.6).stream.sample(0.6)[1]
    j = int(np.argmax(np.abs(moving)))
    push = np.zeros(chain.n)
    push[j] = 0.3 * math.copysign(1.0, moving[j])
    ahead.append(closed_loop(chain, Servo(Q0, lag, zeta), [(0.05, target)], args.rate, 0.002,
                             1.5, push=(0.6, push)).detected)
    found = [d for d in at_rest + ahead if d is not None]
    return {'servo': 'first order' if zeta is None else f'second order, zeta {zeta:g}',
            'lag_s': lag, 'moves': args.moves, 'resyncs_node': resyncs['node'],
            'resyncs_previous': resyncs['previous'],
            'pushes_detected': f'{len(found)} of {len(at_rest) + len(ahead)}',
            'detect_at_rest_ms_max': _max_ms(at_rest), 'detect_ahead_ms': _max_ms(ahead),
            'detect_median_ms': 1e3 * statistics.median(found) if found else None}


def _max_ms(values):
    values = [v for v in values if v is not None]
    return 1e3 * max(values) if values else None


def run(args):
    """Run every servo model; print a table (or one JSON object)."""
    chain = iiwa14()
    rows = [_servo_row(chain, lag, zeta, args) for zeta in (None, 1.0) for lag in args.lags]
    report = {'benchmark': 'feedback', 'machine': machine_info(), 'rate_hz': args.rate,
              'tolerance_rad': TOLERANCE, 'servo_lag_s': SERVO_LAG, 'rows': rows}
    if args.json:
        print_json(report)
        return 0
    print_title('feedback', f'iiwa14; states at {args.rate:g} Hz, 2 ms late; '
                f'resync_tolerance {TOLERANCE:g} rad, servo_lag {SERVO_LAG:g} s',
                report['machine'])
    print_table(['servo', 'lag s', 'moves', 're-syncs (node)', 're-syncs (previous rule)',
                 'pushes detected', 'detection at rest, ms (max)',
                 'detection ahead of motion, ms', 'detection ms (median)'],
                [(r['servo'], f"{r['lag_s']:g}", r['moves'], r['resyncs_node'],
                  r['resyncs_previous'], r['pushes_detected'], _fmt(r['detect_at_rest_ms_max']),
                  _fmt(r['detect_ahead_ms']), _fmt(r['detect_median_ms'])) for r in rows])
    return 0


def _fmt(value):
    return '-' if value is None else f'{value:.3g}'
