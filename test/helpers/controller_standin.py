# SPDX-License-Identifier: Apache-2.0

"""A ros2_control stand-in in its own process for the DDS tests: controller, hardware, broadcaster.

The controller is ik_node.bench.standins' emulation of joint_trajectory_controller
(trajectory_msgs/JointTrajectory on its topic: validation on receipt, replacement
at the next update, splines by the fields present, hold after the end) or of
forward_position_controller (std_msgs/Float64MultiArray: the newest array each
update, a wrong size deactivates it), updated at ``--rate`` on this node's
clock; the hardware is mock_components' (state = command, velocity state 0) or,
with ``--lag``, a first-order servo. Joint states go out on /joint_states as
joint_state_broadcaster sends them (here in reversed order, with an extra
joint when asked: feedback is matched by name).

For the tests: ``~/written`` (Float64MultiArray: time in seconds since this
node's start, then the positions written, controller order) is every command
the controller wrote; ``~/rejected`` (String) every refused message with its
reason; ``~/push`` displaces the state and holds the displaced joints there
for at least PUSH_HOLD_S and PUSH_HOLD_STATES published states (a hand that
pushes and holds: a push the servo pulled back before any state showed it
would not be a push to follow); ``~/pause`` (Bool) stops
and resumes the joint states (a broadcaster that died). ``--sim-clock``: the
stand-in is the simulator: it steps a simulated time by one period per update
(from SIM_START_S), publishes it on /clock and runs on it (validation, updates,
stamps), as a simulated controller under use_sim_time does. ``--clock-offset``:
the stand-in runs on a clock this many seconds ahead of the system clock
(negative: behind), as a controller on the robot's own computer does: it
validates and samples the node's stamps, and stamps its joint states, on it.

``--group TOPIC N`` (repeated): one controller manager with several
controllers, as two arms usually have (``left_arm_controller``,
``right_arm_controller``): joint_trajectory_controllers in trajectory mode,
forward_position_controllers in position mode; each takes the next N of
``--joints`` on its own topic and mock hardware; one broadcaster publishes
every joint; ``~/written`` carries every joint (a controller that wrote
nothing in a cycle: its hardware's state).

usage: controller_standin.py --joints a b c --initial 0 0 0 --mode trajectory|position
       [--command-topic T] [--rate HZ] [--lag S] [--extra-joint NAME] [--sim-clock]
       [--clock-offset S] [--group TOPIC N ...]
"""

import argparse

from ik_node.bench.standins import ForwardController, LagServo, MockHardware, Point, \
    Trajectory, TrajectoryController
from ik_node.ros.spin import serve, StopRequest
import numpy as np
import rclpy
from rclpy.signals import SignalHandlerOptions
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

# Simulated time starts here (s): far from 0 (a zero stamp means "now" to the controller).
SIM_START_S = 100.0
# A push holds the joints it moved this long (s) and for this many joint states at least.
PUSH_HOLD_S = 0.5
PUSH_HOLD_STATES = 10
DEFAULT_TOPICS = {'trajectory': '/joint_trajectory_controller/joint_trajectory',
                  'position': '/forward_position_controller/commands'}


def _seconds(duration) -> float:
    return duration.sec + duration.nanosec * 1e-9


class Hardwares:
    """Several controllers' mock hardware seen as one system (the broadcaster's view)."""

    has_velocity_state = False

    def __init__(self, parts):
        """Join the parts (MockHardware each), in joint order."""
        self.parts = list(parts)
        self._cuts = np.cumsum([len(p.q) for p in self.parts])[:-1]

    @property
    def q(self):
        """Return every joint's position state, joint order."""
        return np.concatenate([p.q for p in self.parts])

    @q.setter
    def q(self, value):
        for p, piece in zip(self.parts, np.split(np.asarray(value, dtype=float), self._cuts)):
            p.q = piece

    @property
    def v(self):
        """Return every joint's velocity state (0: mock hardware), joint order."""
        return np.concatenate([p.v for p in self.parts])

    @v.setter
    def v(self, value):
        for p, piece in zip(self.parts, np.split(np.asarray(value, dtype=float), self._cuts)):
            p.v = piece


class StandIn:
    """Controller, hardware and broadcaster on one rclpy node."""

    def __init__(self, node, args):
        """Create the interfaces on ``node`` from the command-line arguments."""
        self.node = node
        self.joints = list(args.joints)
        q0 = [float(v) for v in args.initial]
        self.hw = LagServo(q0, args.lag) if args.lag > 0.0 else MockHardware(q0)
        self.sim_ns = int(SIM_START_S * 1e9) if args.sim_clock else None
        self.offset_ns = int(round(args.clock_offset * 1e9))
        self.period_ns = int(round(1e9 / args.rate))
        self.epoch_ns = self.sim_ns if args.sim_clock else self.now_ns()
        self.clock_pub = node.create_publisher(Clock, '/clock', 10) if args.sim_clock else None
        self.extra = args.extra_joint
        self.paused = False
        self.held = None   # (joint mask, positions, until s, states left) of a push
        topic = args.command_topic or DEFAULT_TOPICS[args.mode]
        self.controllers = []
        if args.group:
            self._groups(args, q0)
        elif args.mode == 'trajectory':
            self.controller = TrajectoryController(self.joints, args.rate, self.hw)
            node.create_subscription(JointTrajectory, topic, self.on_trajectory, 10)
        else:
            self.controller = ForwardController(self.joints, args.rate, self.hw)
            node.create_subscription(Float64MultiArray, topic, self.on_array, 10)
        if not args.group:
            self.controllers = [self.controller]
        node.create_subscription(Float64MultiArray, '~/push', self.on_push, 10)
        node.create_subscription(Bool, '~/pause', self.on_pause, 10)
        self.pub = node.create_publisher(JointState, '/joint_states', 10)
        self.written_pub = node.create_publisher(Float64MultiArray, '~/written', 1000)
        self.rejected_pub = node.create_publisher(String, '~/rejected', 100)
        node.create_timer(1.0 / args.rate, self.update)

    def _groups(self, args, q0) -> None:
        """One controller per group of joints (the mode's kind), each on its topic and hardware."""
        counts = [int(n) for _, n in args.group]
        if sum(counts) != len(self.joints) or args.lag > 0.0:
            raise SystemExit('--group: mock hardware, the counts summing to the joints')
        start, parts = 0, []
        for (topic, _), n in zip(args.group, counts):
            hw = MockHardware(q0[start:start + n])
            joints = self.joints[start:start + n]
            if args.mode == 'trajectory':
                controller = TrajectoryController(joints, args.rate, hw)
                self.node.create_subscription(JointTrajectory, topic,
                                              self._trajectory_callback(controller), 10)
            else:
                controller = ForwardController(joints, args.rate, hw)
                self.node.create_subscription(Float64MultiArray, topic,
                                              self._array_callback(controller), 10)
            self.controllers.append(controller)
            parts.append(hw)
            start += n
        self.hw = Hardwares(parts)
        self.controller = self.controllers[0]

    def _array_callback(self, controller):
        def on_array(msg):
            controller.receive(list(msg.data), self.now())
        return on_array

    def _trajectory_callback(self, controller):
        def on_trajectory(msg):
            self.on_trajectory(msg, controller)
        return on_trajectory

    def now_ns(self) -> int:
        """Return this node's clock (the simulated one with --sim-clock), nanoseconds."""
        if self.sim_ns is not None:
            return self.sim_ns
        return self.node.get_clock().now().nanoseconds + self.offset_ns

    def now(self) -> float:
        """Return this node's clock, seconds since it started."""
        return (self.now_ns() - self.epoch_ns) * 1e-9

    def on_trajectory(self, msg, controller=None):
        """Validate a trajectory on this clock and keep it for the next update (the subscriber)."""
        controller = controller or self.controller
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        stamp = 0.0 if stamp_ns == 0 else (stamp_ns - self.epoch_ns) * 1e-9
        traj = Trajectory(list(msg.joint_names), stamp, [
            Point(_seconds(p.time_from_start), list(p.positions), list(p.velocities),
                  list(p.accelerations)) for p in msg.points])
        if stamp == 0.0 and stamp_ns != 0:
            traj.stamp = 1e-12   # a stamp exactly at our epoch is still a stamp
        before = len(controller.rejected)
        now = self.now()
        controller.receive(traj, now)
        if len(controller.rejected) > before:
            end = traj.stamp + traj.points[-1].time_from_start if traj.points else traj.stamp
            detail = (f'{controller.rejected[-1]} | stamp {traj.stamp:.6f} s, ends '
                      f'{end:.6f} s, received {now:.6f} s, {len(traj.points)} points')
            self.rejected_pub.publish(String(data=detail))
            print(f'rejected: {detail}', flush=True)

    def on_array(self, msg):
        """Keep the newest array (the forward controller's subscriber)."""
        self.controller.receive(list(msg.data), self.now())

    def on_push(self, msg):
        """Displace the state and hold it there (the arm was pushed and held)."""
        if len(msg.data) == len(self.joints):
            push = np.array(msg.data)
            self.hw.q = self.hw.q + push
            self.held = (push != 0.0, self.hw.q.copy(), self.now() + PUSH_HOLD_S,
                         PUSH_HOLD_STATES)

    def hold_pushed_joints(self, t: float):
        """Keep the pushed joints where the hand holds them (at rest) until it lets go."""
        if self.held is None:
            return
        mask, q, until, left = self.held
        if t >= until and left <= 0:
            self.held = None
            return
        self.hw.q = np.where(mask, q, self.hw.q)
        self.hw.v = np.where(mask, 0.0, self.hw.v)
        self.held = (mask, q, until, left - (0 if self.paused else 1))

    def on_pause(self, msg):
        """Stop (True) or resume (False) publishing joint states."""
        self.paused = bool(msg.data)

    def update(self):
        """One controller update on this clock; report what was written; broadcast the state."""
        if self.sim_ns is not None:   # the simulator steps its clock, then the controller
            self.sim_ns += self.period_ns
            self.clock_pub.publish(Clock(clock=Time(nanoseconds=self.sim_ns).to_msg()))
        t = self.now()
        writes = [c.update(t) for c in self.controllers]
        if any(w is not None for w in writes):
            parts = [w if w is not None else c.hw.q for w, c in zip(writes, self.controllers)]
            written = np.concatenate(parts)
            self.written_pub.publish(Float64MultiArray(data=[t] + [float(v) for v in written]))
        self.hold_pushed_joints(t)
        if self.paused:
            return
        msg = JointState()
        msg.header.stamp = Time(nanoseconds=self.now_ns()).to_msg()
        names = self.joints[::-1]
        positions = self.hw.q.tolist()[::-1]
        velocities = self.hw.v.tolist()[::-1]
        if self.extra:
            names, positions, velocities = names + [self.extra], positions + [0.0], \
                velocities + [0.0]
        msg.name, msg.position, msg.velocity = names, positions, velocities
        self.pub.publish(msg)


def main():
    """Run the stand-in until SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--joints', nargs='+', required=True)
    parser.add_argument('--initial', nargs='+', type=float, required=True)
    parser.add_argument('--mode', choices=sorted(DEFAULT_TOPICS), required=True)
    parser.add_argument('--command-topic', default='')
    parser.add_argument('--rate', type=float, default=250.0, help='controller update rate, Hz')
    parser.add_argument('--lag', type=float, default=0.0, help='servo time constant, s')
    parser.add_argument('--extra-joint', default='', help='also broadcast this joint')
    parser.add_argument('--sim-clock', action='store_true',
                        help='be the simulator: publish /clock and run on it')
    parser.add_argument('--clock-offset', type=float, default=0.0,
                        help="this controller's clock minus the system clock, s")
    parser.add_argument('--group', nargs=2, action='append', metavar=('TOPIC', 'N'),
                        help='a trajectory controller of the next N joints on TOPIC')
    args = parser.parse_args()
    stop = StopRequest()
    stop.install()
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node('controller_standin')
    StandIn(node, args)
    try:
        serve(node, stop)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
