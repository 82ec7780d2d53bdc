# SPDX-License-Identifier: Apache-2.0

"""``ik_demo``: the README's main job.

Starts ik_node on the bundled 7-DoF arm (a separate process, over DDS on
loopback) standing on its floor, with collision checking on; puts a shelf
in the way of the figure-eight's lower right lobe (over ``~/obstacles``);
streams the figure-eight of target poses with a changing orientation (the
arm slides along the shelf and is held at the margin), then one unreachable
target, then a final reachable one; prints what happens as it happens, then
a summary, and writes a PNG of the tip path against the targets, the joint
trajectories and the arm's smallest distance to the shelf, the floor and
itself over time (the collision model's, at every joint state received).
"""

import argparse
import os
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from ik_node.core.collision.shapes import checked_shape
from ik_node.core.kernels.backend import compiled_status
from ik_node.core.model.chain import Chain
from ik_node.core.motion.paths import FAR_POSITION, figure_eight
from ik_node.core.motion.tracker import TrackerConfig
from ik_node.description.geometry import collision_model
from ik_node.description.urdf import bundled_file, bundled_urdf
from ik_node.ros.conversions import pose_msg
from ik_node.ros.process import free_domain, NodeProcess
import numpy as np
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker, MarkerArray


# The node's default joint acceleration limit (the demo leaves it as it is).
ACCELERATION = TrackerConfig().max_joint_acceleration
# The node's start: bounded, with a line every PROGRESS_S (it serves at once
# and compiles its kernels in the background; a very busy machine is slow).
STARTUP_TIMEOUT_S = 300.0
PROGRESS_S = 5.0
HOME = [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]
MARGIN = 0.01   # the node's default collision_margin, m
# The shelf under the figure-eight's lower right lobe (base frame, m): its
# top at z = 0.48, where the lobe dips to 0.46.
SHELF_CENTER, SHELF_SIZE = (0.55, 0.15, 0.45), (0.3, 0.2, 0.06)
FLOOR_FILE = 'config/obstacles/floor.yaml'   # the plane the arm stands on


class Demo(NodeProcess):
    """The node process and a client that streams targets and records joint states."""

    def __init__(self, domain):
        """Start the node and the client on ROS domain ``domain``."""
        urdf = bundled_urdf('iiwa14.urdf')
        self.chain = Chain.from_urdf_file(urdf, 'iiwa_link_0', 'tool0')
        home = '[' + ', '.join(map(str, HOME)) + ']'
        super().__init__(['-p', f'urdf_path:={urdf}', '-p', 'base_link:=iiwa_link_0',
                          '-p', 'tip_link:=tool0', '-p', 'max_linear_speed:=0.4',
                          '-p', f'initial_positions:={home}', '-p', f'posture:={home}',
                          '-p', 'collision_checking:=true',
                          '-p', f'obstacles_file:={bundled_file(FLOOR_FILE)}',
                          '--log-level', 'error'], domain, 'ik_demo')
        self.joints, self.status = [], {}
        self.held = set()   # the pairs /diagnostics said held the arm
        self.node.create_subscription(JointState, 'joint_states', self._on_joints, 100)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diag, 10)
        self.pub = self.node.create_publisher(PoseStamped, '/ik_node/target_pose', 10)
        self.obstacles = self.node.create_publisher(MarkerArray, '/ik_node/obstacles', 10)

    def _on_joints(self, msg):
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self.joints.append((time.monotonic(), np.array(msg.position), np.array(msg.velocity),
                            stamp_ns))

    def _on_diag(self, msg):
        for status in msg.status:
            self.status = {kv.key: kv.value for kv in status.values}
            self.status['message'] = status.message
            if self.status.get('collision', '').startswith('held'):
                self.held.add(self.status['collision'].split(': ', 1)[-1].split(' at ')[0])

    def add_shelf(self):
        """Put the shelf in the arm's world (visualization_msgs CUBE on ~/obstacles)."""
        marker = Marker(ns='demo', id=1, type=Marker.CUBE, action=Marker.ADD)
        marker.header.frame_id = 'iiwa_link_0'
        marker.pose.position.x, marker.pose.position.y, marker.pose.position.z = SHELF_CENTER
        marker.pose.orientation.w = 1.0
        marker.scale.x, marker.scale.y, marker.scale.z = SHELF_SIZE
        self.obstacles.publish(MarkerArray(markers=[marker]))

    def send(self, p, q):
        """Publish a target pose in the base frame."""
        msg = PoseStamped()
        msg.header.frame_id = 'iiwa_link_0'
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.pose = pose_msg(p, q)
        self.pub.publish(msg)

    def wait_for_tip(self, position, tolerance_m, timeout_s):
        """Spin until the tip is within tolerance of position (bounded); return seconds."""
        start = time.monotonic()
        while np.linalg.norm(self.tip(self.joints[-1][1]) - position) > tolerance_m and \
                time.monotonic() - start < timeout_s:
            self.spin(0.1)
        return time.monotonic() - start

    def wait_still(self, timeout_s):
        """Spin until the joints have not moved for 0.2 s (bounded); return the joints."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            recent = np.array([j[1] for j in self.joints[-20:]])
            if len(recent) == 20 and float(np.ptp(recent, axis=0).max()) <= 1e-9:
                break
            self.spin(0.1)
        return self.joints[-1][1].copy()

    def tip(self, q):
        """Tip position of q by forward kinematics."""
        return self.chain.forward(q)[:3, 3]


def wait_for_node(demo, timeout_s: float = STARTUP_TIMEOUT_S) -> bool:
    """Spin until the node publishes joint_states, hears targets and runs its usual backend.

    With numba installed the demo waits for the compiled kernels (diagnostics
    ``backend``): on its first start the node serves on the numpy backend
    while it compiles them, and the demo shows the node as it then runs.
    Prints progress every PROGRESS_S seconds. False when the node exited
    first or did not start within ``timeout_s``.
    """
    want = compiled_status()[0]
    start = time.monotonic()
    note = start + PROGRESS_S
    while not demo.joints or demo.pub.get_subscription_count() == 0 or \
            demo.status.get('backend') != want:
        now = time.monotonic()
        if demo.proc.poll() is not None:
            print(f'ik_demo: the node exited with code {demo.proc.returncode} before it started')
            return False
        if now - start > timeout_s:
            print(f'ik_demo: the node did not start within {timeout_s:.0f} s')
            return False
        if now >= note:
            note += PROGRESS_S
            print(f'waiting for the node to start: {now - start:.0f} s' if not demo.joints else
                  f'waiting for the node to compile its kernels (its first start): '
                  f'{now - start:.0f} s')
        demo.spin(0.05)
    return True


def run(args):
    """Run the demo; return the process exit code. The node is stopped on every path."""
    demo = Demo(args.domain if args.domain is not None else free_domain())
    code = None
    try:
        if not wait_for_node(demo):
            return 1
        print(f'node up: {len(demo.chain.joint_names)} joints, publishing joint_states; '
              f'collision checked against its floor, margin {MARGIN} m')
        demo.add_shelf()
        print(f'a shelf in the way: box {SHELF_SIZE} m at {SHELF_CENTER} (top at z = '
              f'{SHELF_CENTER[2] + SHELF_SIZE[2] / 2:.2f} m, under the lower right lobe)')
        center, size = np.array([0.55, 0.0, 0.55]), 0.18
        p0, q0 = figure_eight(0.0, center, size, args.period)
        demo.send(p0, q0)
        print('moving to the start of the figure-eight (smooth move timed by the speed limits)')
        demo.wait_for_tip(p0, 1e-4, 15.0)
        posture_before = demo.wait_still(10.0)
        sent = [(time.monotonic(), p0, q0)]
        start = time.monotonic()
        last_print = 0.0
        while time.monotonic() - start < args.duration:
            t = time.monotonic() - start
            p, q = figure_eight(t, center, size, args.period)
            demo.send(p, q)
            sent.append((time.monotonic(), p, q))
            demo.spin(1.0 / args.rate)
            if t - last_print >= 0.5:
                last_print = t
                s = demo.status
                err = np.linalg.norm(demo.tip(demo.joints[-1][1]) - p)
                print(f't={t:4.1f}s  targets sent {len(sent):4d}  '
                      f"{s.get('arrival', '?'):11s} tip-to-latest-target {1000 * err:6.1f} mm  "
                      f"({s.get('arrival_reason', '')})")
        print('unreachable target: 2 m in front of the robot')
        far = np.array(FAR_POSITION)
        demo.send(far, sent[-1][2])
        demo.spin(1.0)
        unreachable_reported = demo.status.get('target_reachable') == 'false'
        print(f"  diagnostics: {demo.status.get('message', '?')}")
        final_p, final_q = figure_eight(0.0, center, size, args.period)
        demo.send(final_p, final_q)
        print('final reachable target: back to the start of the figure-eight')
        print(f'  arrived after {demo.wait_for_tip(final_p, 1e-5, 20.0):.1f} s')
        posture_gap = float(np.max(np.abs(demo.wait_still(20.0) - posture_before)))
        final_err = np.linalg.norm(demo.tip(demo.joints[-1][1]) - final_p)
        code = demo.close()
    except KeyboardInterrupt:
        return 130
    finally:
        if code is None:
            demo.close()
    times = np.array([j[0] for j in demo.joints]) - start
    qs = np.array([j[1] for j in demo.joints])
    tips = np.array([demo.tip(q) for q in qs])
    finite = np.all(np.isfinite(qs))
    inside = all(demo.chain.within_limits(q) for q in qs)
    speed_ratio, accel_ratio = _limit_ratios(demo.chain, demo.joints)
    distances = _clearances(demo.chain, qs)
    print('\nsummary')
    print(f'  targets sent: {len(sent) + 2}, joint_states received: {len(qs)}')
    print(f'  every joint state finite: {finite}; within joint limits: {inside}; '
          f'largest joint speed / limit: {speed_ratio:.2f}; '
          f'largest joint acceleration / limit: {accel_ratio:.2f}')
    print(f'  unreachable target reported in /diagnostics: {unreachable_reported}')
    lowest = float(np.min(distances)) if len(distances) else float('nan')
    held = ', '.join(sorted(demo.held)) or 'nothing'
    print(f'  smallest distance between the arm and the shelf, the floor or itself: '
          f'{1000 * lowest:.2f} mm (margin {1000 * MARGIN:.0f} mm); held by: {held}')
    print(f'  final tip error: {1000 * final_err:.3f} mm; node exit code: {code}')
    came_back = 'the posture came back' if posture_gap <= 1e-3 else 'ANOTHER POSTURE'
    print(f'  back at the start: joints within {posture_gap:.2g} rad of the first pass '
          f'({came_back})')
    png = _plot(args.output, times, tips, np.array([s[1] for s in sent]), qs,
                demo.chain.joint_names, distances)
    print(f'  plot: {png}')
    # 1e-6: the rounding of positions differenced over ~10 ms (the limits are exact).
    within = speed_ratio <= 1.0 + 1e-6 and accel_ratio <= 1.0 + 1e-6
    # 1 mm: the jerk stage's corner between the guarded steps (doc/collision.md).
    ok = finite and inside and within and unreachable_reported and final_err < 1e-3 and \
        code == 0 and posture_gap <= 1e-3 and lowest >= MARGIN - 1e-3
    return 0 if ok else 1


def _limit_ratios(chain, joints):
    """Largest joint speed / limit and acceleration / limit between consecutive joint states.

    From the positions and header stamps (not the velocities the node reports):
    first divided differences are the velocity at some instant between two
    states, twice the second ones the acceleration at some instant within three
    (mean value theorem for divided differences: exact for any C2 motion,
    whatever the spacing of the stamps).
    """
    if len(joints) < 3:
        return 0.0, 0.0
    q = np.array([j[1] for j in joints])
    t = np.array([j[3] for j in joints], dtype=np.int64)
    keep = np.concatenate(([True], np.diff(t) > 0))   # a repeated stamp repeats the state
    q, dt = q[keep], np.diff(t[keep]) * 1e-9
    v = np.diff(q, axis=0) / dt[:, None]
    a = 2.0 * np.diff(v, axis=0) / (dt[1:] + dt[:-1])[:, None]
    return float(np.max(np.abs(v) / chain.velocity)), \
        float(np.max(np.abs(a) / ACCELERATION))


def _clearances(chain, qs):
    """Return (len(qs),) the smallest distance, m, between checked pairs at each joint state.

    The collision model of the node's description (its own pairs), with the
    floor and the shelf; for the plot and the summary.
    """
    with open(bundled_urdf('iiwa14.urdf'), encoding='utf-8') as handle:
        xml = handle.read()
    model, _ = collision_model(xml, chain, home=np.array(HOME))
    shelf = np.eye(4)
    shelf[:3, 3] = SHELF_CENTER
    model.set_obstacles({'shelf': (checked_shape('box', SHELF_SIZE, shelf, source='shelf'),),
                         'floor': (checked_shape('halfspace', (), np.eye(4), source='floor'),)})
    return np.array([model.distances(q, 0.1).lowest for q in qs])


def _plot(folder, times, tips, targets, qs, names, distances):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    os.makedirs(folder, exist_ok=True)
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(18, 5))
    ax1.plot(targets[:, 1], targets[:, 2], '.', ms=3, color='tab:orange', label='targets')
    ax1.plot(tips[:, 1], tips[:, 2], '-', lw=1, color='tab:blue', label='tip (FK of joint_states)')
    from matplotlib.patches import Rectangle
    (x, y, z), (_, dy, dz) = SHELF_CENTER, SHELF_SIZE
    ax1.add_patch(Rectangle((y - dy / 2, z - dz / 2), dy, dz, color='grey', alpha=0.4,
                            label='shelf (x %.2f-%.2f m)' % (x - 0.15, x + 0.15)))
    ax1.set_xlabel('y (m)')
    ax1.set_ylabel('z (m)')
    ax1.set_title('Tip path vs targets (y-z plane)')
    ax1.axis('equal')
    ax1.legend()
    for i, name in enumerate(names):
        ax2.plot(times, qs[:, i], lw=1, label=name)
    ax2.set_xlabel('time (s)')
    ax2.set_ylabel('joint position (rad)')
    ax2.set_title('Joint trajectories')
    ax2.legend(fontsize=7, ncol=2)
    ax3.plot(times, 1000 * np.minimum(distances, 0.1), lw=1, color='tab:green',
             label='smallest distance (shelf, floor, self)')
    ax3.axhline(1000 * MARGIN, color='tab:red', lw=1, ls='--', label='collision_margin')
    ax3.set_xlabel('time (s)')
    ax3.set_ylabel('distance (mm; 100 = farther)')
    ax3.set_title('Clearance over time')
    ax3.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(folder, 'ik_demo.png')
    fig.savefig(path, dpi=110)
    return path


def main(argv=None):
    """Entry point of the ``ik_demo`` console script."""
    parser = argparse.ArgumentParser(prog='ik_demo', description=__doc__.splitlines()[0])
    parser.add_argument('--duration', type=float, default=10.0, help='seconds of streaming')
    parser.add_argument('--rate', type=float, default=20.0, help='targets per second')
    parser.add_argument('--period', type=float, default=8.0, help='figure-eight period, s')
    parser.add_argument('--domain', type=int,
                        help='ROS_DOMAIN_ID (default: a free one in 120-230)')
    parser.add_argument('--output', default='demo_output', help='folder of the PNG')
    return run(parser.parse_args(argv))


if __name__ == '__main__':
    sys.exit(main())
