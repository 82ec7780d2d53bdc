# SPDX-License-Identifier: Apache-2.0

"""``ik_bench fuzz``: garbage and valid targets through the node over DDS.

Hypothesis (seeded) draws batches of PoseStamped / PointStamped messages with
NaN, inf, huge (1e300) and denormal values, zero and non-unit quaternions,
empty / unknown / odd frame_ids, stamps in the future and going backwards,
and bursts of identical targets; each batch ends with a reachable target.
The node must stay up, publish only finite joint states within the limits,
count every rejected message under its reason, and reach every one of the
reachable targets. The test suite runs the same session, CI-sized.

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
from ik_node.ros.process import free_domain
from ik_node.urdf import bundled_urdf
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


def message_batches(max_batch: int = 12):
    """Hypothesis strategy: lists of (kind, frame, values, stamp, repeat)."""
    from hypothesis import strategies as st
    number = st.one_of(st.sampled_from(SPECIAL), st.floats(-2.0, 2.0), st.floats(-2.0, 2.0),
                       st.floats(allow_nan=True, allow_infinity=True))
    tiny = st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1e-300, 1e-7, -3e-7])
    quaternion = st.one_of(st.tuples(*[number] * 4), st.tuples(*[tiny] * 4),
                           st.tuples(*[st.floats(-1e3, 1e3)] * 4))
    frame = st.one_of(st.sampled_from(['', BASE]), st.sampled_from(['', BASE]),
                      st.sampled_from(['world', 'map', TIP, ' ', BASE + ' ', 'ü', '/' + BASE]),
                      st.text(max_size=12))
    stamp = st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(0, 999_999_999))
    pose = st.tuples(st.just('pose'), frame,
                     st.builds(lambda p, q: p + q, st.tuples(*[number] * 3), quaternion), stamp,
                     st.sampled_from([1, 1, 1, 5]))
    pole = st.tuples(st.just('pole'), frame, st.tuples(*[number] * 3), stamp, st.just(1))
    return st.lists(st.one_of(pose, pole), min_size=1, max_size=max_batch)


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
    from hypothesis import given, HealthCheck, Phase, seed, settings
    session = FuzzSession(free_domain(), seed=args.seed)
    started = time.perf_counter()
    try:
        @seed(args.seed)
        @settings(max_examples=args.examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
        @given(message_batches())
        def one(batch):
            session.send_batch(batch)
            session.reach_valid_target()
        one()
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
                   help='hypothesis batches, each ending with a reachable target')
    p.set_defaults(func=run)
