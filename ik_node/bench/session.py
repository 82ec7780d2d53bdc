# SPDX-License-Identifier: Apache-2.0

"""ik_node on the bundled 7-DoF arm, watched by a client: for fuzz, flood and soak.

``MonitoredNode`` starts the node as a subprocess on a private ROS domain and
records what it publishes: every joint_states header stamp (the period
jitter), the newest joint vectors, how many were not finite or outside the
limits, the newest diagnostics, and the node process's resident memory.
"""

import array
import collections
import os
import time
from typing import Dict, List, Optional, Tuple

from geometry_msgs.msg import PointStamped, PoseStamped
from ik_node.core.model.chain import Chain
from ik_node.description.urdf import bundled_urdf
from ik_node.ros.conversions import matrix_to_pose
from ik_node.ros.process import NodeProcess
import numpy as np
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

BASE, TIP = 'iiwa_link_0', 'tool0'
Q_START = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0])
# A target is reached when the tip is this close (metres, and Frobenius norm
# of the rotation difference): the node tests' tolerances.
REACHED_M, REACHED_ROT = 1e-4, 1e-3
# rss_kib() values per MiB.
KIB_PER_MIB = 1024.0


def iiwa_arguments(params: Dict[str, object]) -> List[str]:
    """ROS arguments of ik_node on the bundled iiwa14, starting at Q_START, plus ``params``."""
    args = ['-p', f"urdf_path:={bundled_urdf('iiwa14.urdf')}", '-p', f'base_link:={BASE}',
            '-p', f'tip_link:={TIP}',
            '-p', 'initial_positions:=[' + ', '.join(f'{v:.6f}' for v in Q_START) + ']',
            '--log-level', 'error']
    for key, value in params.items():
        args += ['-p', f'{key}:={value}']
    return args


def cpu_seconds(pid: int) -> float:
    """CPU time of process ``pid`` so far, user + system, s (Linux /proc)."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def rss_kib(pid: int) -> Optional[int]:
    """Resident set size of process ``pid`` in KiB (Linux /proc), None when unknown."""
    try:
        with open(f'/proc/{pid}/status', encoding='ascii') as status:
            for line in status:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class MonitoredNode(NodeProcess):
    """ik_node (iiwa14) as a subprocess and a client recording what it publishes."""

    def __init__(self, domain: int, params: Dict[str, object], client_name: str,
                 queue_depth: int = 1000):
        """Start the node with ``params`` on ``domain``; wait until it publishes and listens."""
        self.chain = Chain.from_urdf_file(bundled_urdf('iiwa14.urdf'), BASE, TIP)
        super().__init__(iiwa_arguments(params), domain, client_name)
        self.joints: collections.deque = collections.deque(maxlen=200)
        self.stamps = array.array('d')     # joint_states header stamps, s
        self.bad_joints = 0
        self.diagnostics: Dict[str, str] = {}
        self.rss: List[Tuple[float, int]] = []   # (wall-clock s, KiB)
        self._next_rss = 0.0
        qos = QoSProfile(depth=queue_depth, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, 'joint_states', self._on_joints, qos)
        from diagnostic_msgs.msg import DiagnosticArray
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diag, 10)
        self.pose_pub = self.node.create_publisher(PoseStamped, '/ik_node/target_pose', qos)
        self.pole_pub = self.node.create_publisher(PointStamped, '/ik_node/pole_target', qos)
        try:
            self.wait_for(lambda: self.joints and self.pose_pub.get_subscription_count() > 0
                          and self.pole_pub.get_subscription_count() > 0, 30.0, 'start-up')
        except BaseException:
            self.close()
            raise

    def _on_joints(self, msg):
        q = np.array(msg.position)
        if q.shape != (self.chain.n,) or not np.all(np.isfinite(q)) or \
                not self.chain.within_limits(q):
            self.bad_joints += 1
        self.joints.append((time.monotonic(), q))
        self.stamps.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)

    def _on_diag(self, msg):
        for status in msg.status:
            self.diagnostics = {kv.key: kv.value for kv in status.values}
            self.diagnostics['message'] = status.message

    def count(self, key: str) -> int:
        """Return an integer value of the newest diagnostics (-1 when absent)."""
        return int(self.diagnostics.get(key, -1))

    def watch(self, seconds: float, every_s: float = 0.5, until=None) -> None:
        """Process client callbacks for ``seconds`` (or until ``until()``), sampling RSS.

        The node's RSS goes into ``self.rss`` whenever ``every_s`` seconds have
        passed since the last sample, also across calls (a stream of short
        watches between targets samples at that rate too).
        """
        end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if now >= self._next_rss:
                kib = rss_kib(self.proc.pid)
                if kib is not None:
                    self.rss.append((time.time(), kib))
                self._next_rss = now + every_s
            if now >= end or (until is not None and until()):
                return
            self.spin(min(end - now, 0.05))

    def pose_near_start(self, rng: np.random.Generator) -> np.ndarray:
        """Tip pose (4x4, base frame) of joints drawn within +-0.4 rad of Q_START, in limits."""
        q = np.clip(Q_START + rng.uniform(-0.4, 0.4, self.chain.n),
                    self.chain.lower, self.chain.upper)
        return self.chain.forward(q)

    def send_pose(self, pose: np.ndarray, frame: str = '') -> None:
        """Publish a 4x4 target pose (base frame, metres)."""
        msg = PoseStamped(pose=matrix_to_pose(pose))
        msg.header.frame_id = frame
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pose_pub.publish(msg)

    def at(self, pose: np.ndarray) -> bool:
        """Whether the newest joint state puts the tip at ``pose`` (REACHED_M, REACHED_ROT)."""
        if not self.joints:
            return False
        tip = self.chain.forward(self.joints[-1][1])
        return bool(np.linalg.norm(tip[:3, 3] - pose[:3, 3]) <= REACHED_M
                    and np.linalg.norm(tip[:3, :3] - pose[:3, :3]) <= REACHED_ROT)

    def reaches(self, pose: np.ndarray, timeout_s: float) -> Optional[float]:
        """Seconds until the tip is at ``pose``, or None when not within ``timeout_s``."""
        start = time.monotonic()
        try:
            self.wait_for(lambda: self.at(pose), timeout_s, 'target')
        except TimeoutError:
            return None
        return time.monotonic() - start
