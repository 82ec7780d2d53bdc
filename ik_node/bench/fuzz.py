# SPDX-License-Identifier: Apache-2.0

"""``ik_bench fuzz``: garbage and valid targets through the node over DDS.

A seeded generator draws batches of PoseStamped / PointStamped messages with
NaN, inf, huge (1e300) and denormal values, zero and non-unit quaternions,
empty / unknown / odd frame_ids, stamps in the future and going backwards,
and bursts of identical targets; each batch ends with a reachable target.
The node must stay up, publish only finite joint states within the limits,
count every rejected message under its reason, and reach every one of the
reachable targets. The test suite runs the same session, CI-sized, with
batches from a hypothesis strategy of the same values (test/helpers/fuzzing.py).

The expected reason of each message is computed here from the raw numbers
(``expected_reason``), independently of the node's own checks.
"""

import math
import re
import time
from typing import Dict, Optional

from geometry_msgs.msg import PointStamped, PoseStamped
from ik_node.bench.common import machine_info, print_json, print_measures, print_title
from ik_node.bench.session import BASE, MonitoredNode, TIP
from ik_node.description.urdf import bundled_urdf
from ik_node.ros.process import free_domain
import numpy as np

# Spec of the node's input checks (README, "Bad input"): a quaternion norm
# below this is zero; coordinates at or beyond this many metres are absurd.
MIN_QUAT_NORM = 1e-6
MAX_ABS_POSITION_M = 1e6
SPECIAL = [math.nan, math.inf, -math.inf, 1e300, -1e300, 5e-324, -5e-324, 0.0, -0.0,
           1e6, -1e6, 999999.0, 1e-7, 2.0]


def _links_of_the_bundled_arm() -> frozenset:
    """Return the iiwa14's link names, read with a regular expression (not ik_node's parser)."""
    with open(bundled_urdf('iiwa14.urdf'), encoding='utf-8') as handle:
        return frozenset(re.findall(r'<link\s+name="([^"]+)"', handle.read()))


# Valid frame_ids of the fuzzed node: empty (the base) or any link of its model.
FRAMES = frozenset({''}) | _links_of_the_bundled_arm()


def expected_reason(kind: str, frame: str, values) -> Optional[str]:
    """Reason a message must be rejected for, or None when it is valid.

    ``kind`` is 'pose' (values: x y z qx qy qz qw) or 'pole' (x y z). Checks in
    the documented order: frame (empty or a link of the model), finite,
    quaternion norm, absurd position.
    """
    if frame not in FRAMES:
        return 'wrong_frame'
    if not all(math.isfinite(v) for v in values):
        return 'not_finite'
    if kind == 'pose' and math.hypot(*values[3:]) < MIN_QUAT_NORM:
        return 'zero_quaternion'
    if not all(abs(v) < MAX_ABS_POSITION_M for v in values[:3]):
        return 'absurd_position'
    return None


def raw_message(kind: str, frame: str, values, stamp=(0, 0)):
    """Build a PoseStamped ('pose': x y z qx qy qz qw) or PointStamped ('pole': x y z) as is."""
    if kind == 'pose':
        msg = PoseStamped()
        (msg.pose.position.x, msg.pose.position.y, msg.pose.position.z,
         msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
         msg.pose.orientation.w) = values
    else:
        msg = PointStamped()
        msg.point.x, msg.point.y, msg.point.z = values
    msg.header.frame_id = frame
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
    return msg


# Frames beside the base and '': the tip, others the node does not know, odd spellings.
ODD_FRAMES = ['world', 'map', TIP, ' ', BASE + ' ', 'ü', '/' + BASE]
TINY = [0.0, -0.0, 5e-324, -5e-324, 1e-300, 1e-7, -3e-7]


def _any_float(rng: np.random.Generator) -> float:
    """Return a float64 of 8 random bytes: NaNs, infinities, denormals, huge ones included."""
    return float(np.frombuffer(rng.bytes(8), dtype=np.float64)[0])


def _number(rng: np.random.Generator) -> float:
    """Return a special value, a plain one in [-2, 2] (half the draws) or any float64."""
    kind = int(rng.integers(4))
    if kind == 0:
        return float(SPECIAL[int(rng.integers(len(SPECIAL)))])
    return float(rng.uniform(-2.0, 2.0)) if kind < 3 else _any_float(rng)


def _frame(rng: np.random.Generator) -> str:
    """Return '' or the base (half the draws), an odd frame, or random text (up to 12 chars)."""
    kind = int(rng.integers(4))
    if kind < 2:
        return ['', BASE][int(rng.integers(2))]
    if kind == 2:
        return ODD_FRAMES[int(rng.integers(len(ODD_FRAMES)))]
    return ''.join(chr(int(c)) for c in rng.integers(32, 0x2FF, size=int(rng.integers(13))))


def _quaternion(rng: np.random.Generator) -> tuple:
    """Return 4 numbers: any, tiny (near zero) or within [-1e3, 1e3]."""
    kind = int(rng.integers(3))
    if kind == 0:
        return tuple(_number(rng) for _ in range(4))
    if kind == 1:
        return tuple(float(TINY[int(i)]) for i in rng.integers(len(TINY), size=4))
    return tuple(float(x) for x in rng.uniform(-1e3, 1e3, size=4))


def draw_batch(rng: np.random.Generator, max_batch: int = 12) -> list:
    """Return 1 to ``max_batch`` messages (kind, frame, values, stamp, repeat) drawn from ``rng``.

    The distribution of the tests' hypothesis strategy (test/helpers/fuzzing.py)
    without hypothesis: poses (position and quaternion, a burst of 5 identical
    ones in a quarter of them) and poles (a point), with special and random
    numbers, odd frames and stamps anywhere in the 32-bit range.
    """
    batch = []
    for _ in range(int(rng.integers(1, max_batch + 1))):
        stamp = (int(rng.integers(-2**31, 2**31)), int(rng.integers(0, 1_000_000_000)))
        if rng.random() < 0.5:
            values = tuple(_number(rng) for _ in range(3)) + _quaternion(rng)
            batch.append(('pose', _frame(rng), values, stamp, [1, 1, 1, 5][int(rng.integers(4))]))
        else:
            batch.append(('pole', _frame(rng), tuple(_number(rng) for _ in range(3)), stamp, 1))
    return batch


class FuzzSession(MonitoredNode):
    """ik_node (iiwa14) as a subprocess and a client that fuzzes it."""

    def __init__(self, domain: int, smoothing: bool = True, seed: int = 0):
        """Start the node on ``domain`` and wait until it publishes; ``seed`` the targets."""
        # High Cartesian limits: valid garbage targets metres apart must not
        # take minutes; joint speed limits still hold.
        super().__init__(domain, {'smoothing': str(smoothing).lower(),
                                  'target_queue_depth': 1000, 'max_linear_speed': 10.0,
                                  'max_angular_speed': 20.0}, 'ik_fuzz_client')
        self.rng = np.random.default_rng(seed)
        self.sent: Dict[str, int] = {}
        self.valid = {'pose': 0, 'pole': 0}
        self.reached = self.missed = 0
        #: What the node showed at the last target not reached (the failure's message).
        self.last_miss: Dict[str, object] = {}

    def send_batch(self, batch) -> None:
        """Publish a drawn batch (spaced by 1 ms), tallying the expected rejections."""
        for kind, frame, values, stamp, repeat in batch:
            reason = expected_reason(kind, frame, values)
            msg = raw_message(kind, frame, values, stamp)
            pub = self.pose_pub if kind == 'pose' else self.pole_pub
            for _ in range(repeat):
                pub.publish(msg)
                if reason is None:
                    self.valid[kind] += 1
                else:
                    self.sent[reason] = self.sent.get(reason, 0) + 1
                self.executor.spin_once(timeout_sec=0.001)

    def reach_valid_target(self, timeout_s: float = 30.0) -> bool:
        """Send a reachable target near the start pose; return whether the arm got there."""
        pose = self.pose_near_start(self.rng)
        # A pole from the garbage may have turned the elbow: the check is on
        # the tip pose only (the swivel is free).
        self.send_pose(pose, BASE if self.rng.random() < 0.5 else '')
        self.valid['pose'] += 1
        if self.reaches(pose, timeout_s) is None:
            self.missed += 1
            tip = self.chain.forward(self.joints[-1][1]) if self.joints else None
            self.last_miss = {
                'target_xyz': pose[:3, 3].round(4).tolist(),
                'tip_off_m': None if tip is None else
                float(np.linalg.norm(tip[:3, 3] - pose[:3, 3])),
                'joint_states': len(self.joints),
                'node': {k: v for k, v in self.diagnostics.items()
                         if k in ('message', 'reachable', 'reason', 'solver', 'backend',
                                  'targets_received', 'ticks_late', 'twist_timeouts')}}
            return False
        self.reached += 1
        return True

    def counted(self) -> Dict[str, int]:
        """Rejected counts by reason from the node's newest diagnostics."""
        return {k[len('rejected_'):]: int(v) for k, v in self.diagnostics.items()
                if k.startswith('rejected_') and k != 'rejected_messages'}

    def wait_for_counts(self, timeout_s: float = 10.0) -> bool:
        """Wait until the node's diagnostics count what was sent; return whether they do."""
        def agree():
            return self.counted() == {k: v for k, v in self.sent.items() if v} and \
                int(self.diagnostics.get('targets_received', -1)) == self.valid['pose'] and \
                int(self.diagnostics.get('poles_received', -1)) == self.valid['pole']
        try:
            self.wait_for(agree, timeout_s, 'diagnostics counts')
        except TimeoutError:
            return False
        return True


def run(args):
    """Fuzz for ``--examples`` batches; print a table (or JSON); exit 1 on any failure."""
    session = FuzzSession(free_domain(), seed=args.seed)
    draws = np.random.default_rng([args.seed, 1])
    started = time.perf_counter()
    try:
        for _ in range(args.examples):
            session.send_batch(draw_batch(draws))
            session.reach_valid_target()
        counts_agree = session.wait_for_counts()
        alive = session.proc.poll() is None
    finally:
        code = session.close()
    report = {'benchmark': 'fuzz', 'machine': machine_info(), 'examples': args.examples,
              'messages_rejected': sum(session.sent.values()),
              'rejected_by_reason': session.sent, 'node_counted': session.counted(),
              'counts_agree': counts_agree, 'valid_targets': session.valid['pose'],
              'valid_poles': session.valid['pole'], 'valid_targets_reached': session.reached,
              'valid_targets_missed': session.missed,
              'bad_joint_states': session.bad_joints, 'node_alive_until_stopped': alive,
              'node_exit_code': code, 'seconds': time.perf_counter() - started}
    ok = counts_agree and alive and code == 0 and not session.missed and not session.bad_joints
    report['ok'] = ok
    if args.json:
        print_json(report)
    else:
        print_title('fuzz', f'{args.examples} batches', report['machine'])
        print_measures((k, v) for k, v in report.items() if k not in ('benchmark', 'machine'))
    return 0 if ok else 1


def add_parser(subparsers):
    """Register the ``fuzz`` subcommand."""
    p = subparsers.add_parser('fuzz', help='fuzz the node with garbage and valid targets')
    p.add_argument('--examples', type=int, default=300,
                   help='batches (seeded by --seed), each ending with a reachable target')
    p.set_defaults(func=run)
