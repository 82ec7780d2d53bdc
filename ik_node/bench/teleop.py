# SPDX-License-Identifier: Apache-2.0

"""``ik_bench teleop``: twist teleoperation through singular configurations.

Each run is a seeded joint-space path of the bundled arm that passes within
``--offset`` rad of a singular configuration (a stretched elbow, aligned
wrist axes, the all-zero pose) with a minimum-jerk time law; the tip's
motion along it is sent to the motion tracker as a stream of twists (base
or tip frame, at ``--twist-rate``), commanded at ``--rate``, exactly as the
node does but without DDS. Twists stop mid-motion (at 75 % of the path):
the dead-man must bring the arm to rest.

Reported per singular configuration: the tracking error (commanded tip
against the path, while twists come), the largest joint speed over its
limit, halts (50 ms or more without joint motion while the twists move
the tip), and the time to rest after the last twist. Beside them, what
MoveIt Servo's documented rule would do on the same paths: it scales its
speed down when the condition number of the 6 x n Jacobian exceeds
``lower_singularity_threshold`` (17) and halts above
``hard_stop_singularity_threshold`` (30), its defaults.
"""

import math
import time as _time

from ik_node.bench.common import machine_info, print_json, print_table
from ik_node.core.ik.factory import make_solver
from ik_node.core.kernels.base import rotation_vector
from ik_node.core.model.chain import Chain
from ik_node.core.motion.teleop import screw_translation
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.poses import pose_error
from ik_node.description.urdf import bundled_urdf
import numpy as np

BUNDLED = {
    'iiwa14': ('iiwa14.urdf', 'iiwa_link_0', 'tool0'),
    'ur5e': ('ur5e.urdf', 'base_link', 'tool0'),
}
# The joint that is zero at each singular configuration (None: all joints zero).
SINGULAR_JOINT = {
    ('iiwa14', 'stretched elbow'): 3, ('iiwa14', 'aligned wrist'): 5,
    ('iiwa14', 'all-zero pose'): None,
    ('ur5e', 'stretched elbow'): 2, ('ur5e', 'aligned wrist'): 4, ('ur5e', 'all-zero pose'): None,
}
# MoveIt Servo's default thresholds on the Jacobian's condition number.
SERVO_DECELERATE = 17.0
SERVO_HALT = 30.0
# Twists stop at this fraction of the path's duration (mid-motion).
CUT = 0.75
# A halt: this long without joint motion while the twists move the tip.
HALT_S = 0.05
HALT_TIP_SPEED = 1e-3   # m/s


def load_arm(arm):
    """Return the bundled arm's chain."""
    file, base, tip = BUNDLED[arm]
    return Chain.from_urdf_file(bundled_urdf(file), base, tip)


def minimum_jerk(u):
    """Position s(u) in [0, 1] of the minimum-jerk law at u in [0, 1] (rest to rest)."""
    u = min(max(u, 0.0), 1.0)
    return u * u * u * (10.0 - 15.0 * u + 6.0 * u * u)


class Crossing:
    """A seeded path of joints through (near) a singular configuration.

    ``q(t)`` goes from ``start`` to ``end`` (joints, rad) in ``duration`` s
    with the minimum-jerk law; the middle is within ``offset`` of the
    singular configuration in its singular joint(s).
    """

    def __init__(self, chain, arm, kind, rng, span=0.8, duration=2.0, offset=0.01):
        """Draw the path: a random centre at the singularity, a direction across it."""
        joint = SINGULAR_JOINT[(arm, kind)]
        n = chain.n
        if joint is None:
            centre = rng.uniform(-offset, offset, n)
            direction = rng.normal(size=n)
        else:
            centre = rng.uniform(-1.2, 1.2, n)
            centre[joint] = rng.uniform(-offset, offset)
            direction = 0.5 * rng.normal(size=n)
            direction[joint] = rng.choice([-1.5, 1.5])
        direction /= np.linalg.norm(direction)
        self.start = np.clip(centre - 0.5 * span * direction, chain.lower, chain.upper)
        self.end = np.clip(centre + 0.5 * span * direction, chain.lower, chain.upper)
        self.duration = duration
        self.body = bool(rng.integers(2))

    def q(self, t):
        """Joints (n,) of the path at time t (s)."""
        return self.start + minimum_jerk(t / self.duration) * (self.end - self.start)


def twist_between(a, b, dt, body):
    """Return the constant twist (linear (3,), angular (3,)) moving pose a (4x4) to b in dt.

    Base frame: ``(p_b - p_a) / dt`` and the rotation vector of ``R_b R_a^T``
    over dt. Tip frame: the SE(3) logarithm of ``a^-1 b`` over dt (so that
    ``integrate_twist`` reproduces b exactly).
    """
    if not body:
        turn = rotation_vector(tuple((b[:3, :3] @ a[:3, :3].T).ravel()))
        return (b[:3, 3] - a[:3, 3]) / dt, np.array(turn) / dt
    phi = np.array(rotation_vector(tuple((a[:3, :3].T @ b[:3, :3]).ravel())))
    local = a[:3, :3].T @ (b[:3, 3] - a[:3, 3])
    v_matrix = np.column_stack([screw_translation(phi, e) for e in np.eye(3)])
    return np.linalg.solve(v_matrix, local) / dt, phi / dt


def condition_number(chain, q):
    """sigma_max / sigma_min of the 6 x n Jacobian at q (inf when singular)."""
    sigma = np.linalg.svd(chain.jacobian(q), compute_uv=False)
    return math.inf if sigma[-1] == 0.0 else float(sigma[0] / sigma[-1])


def drive(chain, crossing, rate=100.0, twist_rate=100.0, settle=2.0, backend='auto',
          record=None):
    """Stream the crossing's twists to a tracker; return the run's figures (a dict).

    ``record``: a list to append every command to (tests judge them).
    """
    # The crossings judge the joint-level slowing at singular configurations; the
    # tip speed limits (twists are scaled to them) are set to the node's largest
    # values so that they do not bind (as before twists were scaled).
    config = TrackerConfig(max_linear_speed=10.0, max_angular_speed=20.0)
    tracker = MotionTracker(chain, make_solver(chain, 'auto', backend=backend), config,
                            crossing.q(0.0), 0.0, backend=backend)
    h, cut = 1.0 / twist_rate, CUT * crossing.duration
    twist_times = np.arange(0.0, cut, h)
    ticks = np.arange(0.5 / rate, cut + settle, 1.0 / rate)
    k, errors, stalled, ratio, rest_at = 0, [], [], 0.0, None
    for t in ticks:
        while k < len(twist_times) and twist_times[k] <= t:
            a, b = chain.forward(crossing.q(twist_times[k])), chain.forward(
                crossing.q(twist_times[k] + h))
            tracker.set_twist(twist_times[k], *twist_between(a, b, h, crossing.body),
                              body=crossing.body)
            k += 1
        cmd = tracker.command(t)
        if record is not None:
            record.append(cmd)
        ratio = max(ratio, float(np.max(np.abs(cmd.v) / chain.velocity)))
        if t < cut:
            errors.append(pose_error(chain.forward(crossing.q(t)), chain.forward(cmd.q)))
            stalled.append(not np.any(cmd.v) and _tip_speed(chain, crossing, t) > HALT_TIP_SPEED)
        elif np.any(cmd.v):
            rest_at = None
        elif rest_at is None:
            rest_at = t
    errors = np.array(errors)
    return {'position_error_m': float(errors[:, 0].max()),
            'orientation_error_rad': float(errors[:, 1].max()),
            'max_speed_ratio': ratio, 'halts': count_halts(stalled, HALT_S * rate),
            'time_to_rest_s': math.nan if rest_at is None else rest_at - twist_times[-1],
            'condition_max': max(condition_number(chain, crossing.q(t))
                                 for t in np.linspace(0.0, cut, 200))}


def _tip_speed(chain, crossing, t, h=0.005):
    """Speed (m/s) of the path's tip at t, by a central difference."""
    return float(np.linalg.norm(chain.forward(crossing.q(t + h))[:3, 3]
                                - chain.forward(crossing.q(t - h))[:3, 3])) / (2.0 * h)


def count_halts(stalled, ticks):
    """Count the runs of at least ``ticks`` consecutive True in ``stalled``."""
    halts, run = 0, 0
    for s in stalled:
        run = run + 1 if s else 0
        halts += run == math.ceil(ticks)
    return halts


def summarize_runs(runs):
    """Aggregate figures of several runs of one kind."""
    pos = np.array([r['position_error_m'] for r in runs])
    rot = np.array([r['orientation_error_rad'] for r in runs])
    rest = np.array([r['time_to_rest_s'] for r in runs])
    cond = np.array([r['condition_max'] for r in runs])
    return {'runs': len(runs),
            'position_error_m': {'median': float(np.median(pos)), 'max': float(pos.max())},
            'orientation_error_rad': {'median': float(np.median(rot)), 'max': float(rot.max())},
            'max_speed_ratio': max(r['max_speed_ratio'] for r in runs),
            'halts': sum(r['halts'] for r in runs),
            'time_to_rest_s': {'median': float(np.median(rest)), 'max': float(np.max(rest))},
            'servo_decelerates': int(np.sum(cond > SERVO_DECELERATE)),
            'servo_halts': int(np.sum(cond >= SERVO_HALT)),
            'condition_max_median': float(np.median(cond))}


def run(args):
    """Run the benchmark and print a table, or one JSON object with --json."""
    rng = np.random.default_rng(args.seed)
    rows, started = [], _time.perf_counter()
    for arm in args.arms:
        chain = load_arm(arm)
        for (name, kind), _ in SINGULAR_JOINT.items():
            if name != arm:
                continue
            runs = [drive(chain, Crossing(chain, arm, kind, rng, offset=args.offset),
                          rate=args.rate, twist_rate=args.twist_rate, backend=args.backend)
                    for _ in range(args.runs)]
            rows.append(dict(summarize_runs(runs), arm=arm, singularity=kind))
    report = {'benchmark': 'teleop', 'seed': args.seed, 'machine': machine_info(),
              'rate_hz': args.rate, 'twist_rate_hz': args.twist_rate, 'offset_rad': args.offset,
              'twist_timeout_s': TrackerConfig().twist_timeout,
              'wall_s': _time.perf_counter() - started, 'rows': rows}
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f"ik_bench teleop  (seed {args.seed}; {info['cpu']}, {info['cores']} cores; "
          f"commit {info['commit']})")
    print(f'{args.runs} seeded crossings per row, within {args.offset} rad of the singular '
          f'configuration; twists at {args.twist_rate:g} Hz, commands at {args.rate:g} Hz, '
          f"dead-man {report['twist_timeout_s']} s")
    print_table(['arm', 'singularity', 'worst tracking error per run, mm (median / max)',
                 'rad (median / max)', 'max joint speed / limit', 'halts',
                 'rest after last twist s (median / max)', 'Servo: slows / halts'],
                [(r['arm'], r['singularity'],
                  f"{1e3 * r['position_error_m']['median']:.3g} / "
                  f"{1e3 * r['position_error_m']['max']:.3g}",
                  f"{r['orientation_error_rad']['median']:.3g} / "
                  f"{r['orientation_error_rad']['max']:.3g}",
                  f"{r['max_speed_ratio']:.3f}", r['halts'],
                  f"{r['time_to_rest_s']['median']:.3f} / {r['time_to_rest_s']['max']:.3f}",
                  f"{r['servo_decelerates']} / {r['servo_halts']} of {r['runs']}")
                 for r in rows])
    return 0


def add_parser(subparsers):
    """Register the ``teleop`` subcommand."""
    p = subparsers.add_parser('teleop', help='twist teleoperation through singularities')
    p.add_argument('--arms', nargs='+', default=sorted(BUNDLED), choices=sorted(BUNDLED))
    p.add_argument('--runs', type=int, default=20, help='crossings per singularity (20)')
    p.add_argument('--offset', type=float, default=0.01,
                   help='largest distance of the path from the singular joint value, rad')
    p.add_argument('--rate', type=float, default=100.0, help='command rate, Hz (100)')
    p.add_argument('--twist-rate', type=float, default=100.0, help='twist rate, Hz (100)')
    p.add_argument('--backend', default='auto', choices=('auto', 'numba', 'numpy'))
    p.set_defaults(func=run)
