# SPDX-License-Identifier: Apache-2.0

"""The full loop over real DDS: feedback in, ros2_control commands out, twists, frames.

ik_node runs as a subprocess with ``feedback_topic`` set (from
config/ros2_control/ik_node_<output>.yaml, as the README says to run it),
commanding a controller stand-in (test/helpers/controller_standin.py, another
process: the emulated joint_trajectory_controller or
forward_position_controller of ik_node.bench.standins on mock hardware or a
lagging servo) that broadcasts joint_states and reports what it wrote to the
hardware. Arrival is judged on the joint states it broadcasts, by the tests'
own FK.
"""

import json
import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import time

from geometry_msgs.msg import PoseStamped, TwistStamped
from ik_node.core.model.chain import Chain
from ik_node.core.motion.tracker import TrackerConfig
from models import TEST
from node_process import ARMS, model_params, NodeUnderTest, stop_process
import numpy as np
from oracle import forward, pose_errors
import pytest
from ros_helpers import check_joint_stream, OutputDrain, stamp_ns, unique_domain_id
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

# Every loop here runs on wall-clock time: CI reruns them beside CPU hogs.
pytestmark = [pytest.mark.integration, pytest.mark.wallclock]

MOCK = TEST / 'helpers' / 'controller_standin.py'
ROS2_CONTROL = Path(__file__).resolve().parents[2] / 'config' / 'ros2_control'
ACCEL = TrackerConfig().max_joint_acceleration
# Where each arm's mock starts: not the node's initial_positions (the node must
# start from the measured state, without a jump).
MOCK_START = {'iiwa14': [0.1, 0.6, -0.1, -1.3, 0.2, 0.8, 0.3],
              'ur5e': [0.3, -1.2, 1.5, -1.9, -1.57, 0.2]}


def chain_of(arm):
    """Return the bundled arm's chain."""
    path, base, tip = ARMS[arm]
    return Chain.from_urdf_file(str(path), base, tip)


class Command:
    """One command the node sent: (stamp ns or None, positions (n,) in chain order, velocities)."""

    def __init__(self, stamp, q, v):
        """Keep the command."""
        self.stamp, self.q, self.v = stamp, np.asarray(q), None if v is None else np.asarray(v)


class Loop:
    """ik_node and the controller stand-in on one fresh ROS domain, with a client."""

    def __init__(self, arm, output, lag=0.0, order=None, node_params=None, extra_joint='',
                 sim_clock=False, clock_offset=0.0, rate=None, budget=None):
        """Start the mock (at MOCK_START) and ik_node commanding it through ``output``.

        ``budget``: command_latency_budget, s, in place of the parameter file's.
        """
        self.chain = chain_of(arm)
        self.order = order or self.chain.joint_names
        domain = unique_domain_id()
        mode = 'trajectory' if output == 'joint_trajectory' else 'position'
        start = [MOCK_START[arm][self.chain.joint_names.index(n)] for n in self.order]
        args = [sys.executable, str(MOCK), '--joints', *self.order, '--initial',
                *(str(v) for v in start), '--mode', mode, '--lag', str(lag)]
        if extra_joint:
            args += ['--extra-joint', extra_joint]
        if sim_clock:
            args += ['--sim-clock']
        if clock_offset:
            args += ['--clock-offset', str(clock_offset)]
        if rate:
            args += ['--rate', str(rate)]
        self.mock = subprocess.Popen(args, env=dict(os.environ, ROS_DOMAIN_ID=str(domain)),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.mock_output = OutputDrain(self.mock.stdout)
        params = dict(model_params(arm), **(node_params or {}))
        # The README's ros2_control parameter file of this output.
        extra_args = ['--params-file', str(ROS2_CONTROL / f'ik_node_{output}.yaml')]
        if output == 'position_array':   # the stand-in's update rate, after the file's 500
            extra_args += ['-p', f'controller_rate:={rate or 250.0}']
        if budget is not None:           # after the file, which sets 0.03
            extra_args += ['-p', f'command_latency_budget:={budget}']
        if order is not None:
            params['command_joint_order'] = '[' + ', '.join(f'"{n}"' for n in order) + ']'
        self.node = NodeUnderTest(params, extra_args=extra_args, joint_topic='/joint_states',
                                  domain=domain)
        self.commands = []
        if output == 'joint_trajectory':
            self.node.client.create_subscription(
                JointTrajectory, '/joint_trajectory_controller/joint_trajectory',
                self._on_trajectory, 1000)
        else:
            self.node.client.create_subscription(
                Float64MultiArray, '/forward_position_controller/commands', self._on_array, 1000)
        self.push_pub = self.node.client.create_publisher(Float64MultiArray,
                                                          '/controller_standin/push', 10)
        self.pause_pub = self.node.client.create_publisher(Bool, '/controller_standin/pause', 10)
        self.written = []    # (time s, positions) the stand-in wrote to its hardware
        self.rejected = []
        self.node.client.create_subscription(
            Float64MultiArray, '/controller_standin/written',
            lambda m: self.written.append((m.data[0], np.array(m.data[1:]))), 10000)
        self.node.client.create_subscription(
            String, '/controller_standin/rejected', lambda m: self.rejected.append(m.data), 100)
        self.twist_pub = self.node.client.create_publisher(TwistStamped,
                                                           '/ik_node/target_twist', 10)

    def _chain_order(self, values):
        where = {name: k for k, name in enumerate(self.order)}
        return [values[where[name]] for name in self.chain.joint_names]

    def _on_trajectory(self, msg):
        point = msg.points[0]
        where = {name: k for k, name in enumerate(msg.joint_names)}
        q = [point.positions[where[n]] for n in self.chain.joint_names]
        v = [point.velocities[where[n]] for n in self.chain.joint_names]
        self.commands.append(Command(stamp_ns(msg), q, v))

    def _on_array(self, msg):
        self.commands.append(Command(None, self._chain_order(list(msg.data)), None))

    def flowing(self, publisher, timeout_s=20.0):
        """Wait until commands come and ``publisher`` (push, pause) reaches the mock."""
        return self.node.wait(lambda: len(self.commands) >= 5 and
                              publisher.get_subscription_count() > 0, timeout_s)

    def measured(self):
        """Return the newest joint state the mock broadcast, chain order (looked up by name)."""
        msg = self.node.joints[-1]
        where = {name: k for k, name in enumerate(msg.name)}
        return np.array([msg.position[where[n]] for n in self.chain.joint_names])

    def arrives(self, target, timeout_s=40.0):
        """Wait until the broadcast joints put the tip on target (1e-4 m, 1e-3 rad)."""
        return self.node.wait(lambda: max(np.array(pose_errors(
            self.chain, self.measured(), target)) / [1e-4, 1e-3]) <= 1.0, timeout_s)

    def explain(self):
        """Return what a failed wait needs: the joints, commands, diagnostics, both logs."""
        values = {kv.key: kv.value for array in self.node.diagnostics[-5:]
                  for status in array.status for kv in status.values}
        last = self.commands[-1].q if self.commands else None
        return (f'measured {self.measured()}\nlast of {len(self.commands)} commands {last}\n'
                f'written {len(self.written)}, rejected {self.rejected[-3:]}\n'
                f'diagnostics {values}\nnode log:\n{self.node.drain.text()[-3000:]}\n'
                f'stand-in log:\n{self.mock_output.text()[-1500:]}')

    def stop(self):
        """Stop the node (exit code returned) and the mock."""
        code = self.node.stop()
        stop_process(self.mock)
        return code


LATE = 'trajectory with non-zero start time ends in the past'


def assert_refused_only_when_late(loop, budget):
    """Assert that every refused message reached the controller over ``budget`` s after its stamp.

    The guarantee (README, "Real arms"): a message that reaches the controller
    within command_latency_budget of its stamp is accepted. One later may end
    in the past on arrival and is refused, as upstream does: a stalled process
    or delivery (seen on this shared VM with nothing else running), not the
    node's message. The stand-in reports each refusal with the message's
    stamp and its arrival on the controller's clock.
    """
    for entry in loop.rejected:
        reason, _, detail = entry.partition(' | ')
        assert reason == LATE, loop.explain()
        stamp, received = (float(x) for x in
                           re.findall(r'(?:stamp|received) (-?[0-9.]+) s', detail))
        assert received - stamp > budget, (entry, loop.explain())


def speed(samples):
    """Fastest joint's mean speed over ``samples`` ((time, q) pairs), rad/s."""
    (t0, q0), (t1, q1) = samples[0], samples[-1]
    return float(np.max(np.abs(q1 - q0))) / (t1 - t0)


def final_rest(q):
    """Index where the rows of ``q`` (samples x joints) stop changing for good."""
    changes = np.flatnonzero(np.any(q[1:] != q[:-1], axis=1))
    return int(changes[-1]) + 1 if changes.size else 0


def far_target(chain, start, delta):
    """Tip pose of the joints start + delta (within the limits): reachable."""
    return chain.forward(np.clip(np.array(start) + np.array(delta), chain.lower, chain.upper))


class _AsJointState:
    """A stamped Command with the fields check_joint_stream reads."""

    def __init__(self, c):
        """Wrap the command."""
        self.position, self.velocity = c.q, c.v
        self.header = type('H', (), {'stamp': type('S', (), {
            'sec': c.stamp // 1_000_000_000, 'nanosec': c.stamp % 1_000_000_000})})


def check_commands(commands, chain):
    """Every command finite, within the limits; stamped ones within speed and acceleration."""
    qs = np.array([c.q for c in commands])
    assert np.all(np.isfinite(qs)) and all(chain.within_limits(q) for q in qs)
    stamped = [_AsJointState(c) for c in commands if c.stamp is not None]
    if stamped:
        check_joint_stream(chain, stamped, accel=ACCEL)


def largest_jump(commands):
    """Index k of the command farthest (max over joints) from the one before it, and that step."""
    steps = [np.abs(b.q - a.q) for a, b in zip(commands, commands[1:])]
    k = int(np.argmax([np.max(s) for s in steps]))
    return k + 1, steps[k]


@pytest.mark.parametrize('arm, output, reverse', [
    ('iiwa14', 'joint_trajectory', False),
    pytest.param('ur5e', 'position_array', True, marks=pytest.mark.timely)])
def test_the_loop_starts_from_the_arm_and_reaches_targets(arm, output, reverse):
    """Start from the measured arm, reach a far target, keep the limits, say what the output is.

    position_array is 'timely': beside six CPU hogs the node's 250 Hz arrays
    came more than 1.5 periods apart about 35 times a second (array_stalls
    1376 in 40 s); after each gap forward_position_controller has held the
    last array (the arm stopped), so the plan restarts there at rest, and the
    arm crept 0.01-0.02 rad in 40 s, within every limit. Moving a forward
    controller takes a node on time (README, doc/real-arms.md).
    """
    chain = chain_of(arm)
    order = chain.joint_names[::-1] if reverse else None
    loop = Loop(arm, output, lag=0.02, order=order, extra_joint='gripper_finger')
    try:
        loop.node.ready(60.0)
        assert loop.node.wait(lambda: loop.commands, 20.0)
        # The first command is where the arm is (measured), not the node's initial positions.
        start = np.array(MOCK_START[arm])
        assert np.max(np.abs(loop.commands[0].q - start)) < 0.05, loop.commands[0].q
        target = far_target(chain, start, [0.3, -0.3, 0.2, 0.3, -0.2, 0.3, 0.2][:chain.n])
        loop.node.send(target)
        assert loop.arrives(target), loop.explain()
        check_commands(loop.commands, loop.chain)
        # The broadcaster owns joint_states: the node never publishes there.
        publishers = loop.node.client.get_publishers_info_by_topic('/joint_states')
        assert {p.node_name for p in publishers} == {'controller_standin'}
        assert loop.node.diagnostic('feedback') == 'ok on /joint_states'
        # position_array is not smooth at the hardware, and the node says so, with its rate.
        warned = 'position_array: forward_position_controller writes the newest array'
        assert (warned in loop.node.drain.text()) == (output == 'position_array')
        if output == 'position_array':
            assert 'the 250 Hz arrays' in loop.node.drain.text()
    finally:
        assert loop.stop() == 0


def test_a_pushed_arm_is_followed_from_where_it_is():
    chain = chain_of('iiwa14')
    loop = Loop('iiwa14', 'joint_trajectory', lag=0.05)
    try:
        loop.node.ready(60.0)
        start = np.array(MOCK_START['iiwa14'])
        target = far_target(chain, start, [0.6, -0.4, 0.5, 0.4, -0.5, 0.4, 0.6])
        loop.node.send(target)
        assert loop.flowing(loop.push_pub)
        loop.node.spin(0.5)
        # Ahead of the joint's motion (it moves by -0.4): no lag explains that. The
        # stand-in's hand holds the joint there for 0.5 s and 10 states at least: on a
        # busy machine the node may not see a push the servo pulls back within ~0.15 s
        # (rightly not followed: the arm is back in the commands' lag range). A push back
        # along the way it came stays in that range too: not a disturbance.
        loop.push_pub.publish(Float64MultiArray(data=[0.0, -0.3, 0.0, 0.0, 0.0, 0.0, 0.0]))
        assert loop.node.wait(lambda: int(loop.node.diagnostic('feedback_resyncs') or 0) >= 1,
                              10.0), loop.node.diagnostic('feedback_resyncs')
        assert loop.arrives(target), loop.explain()
        # One resync: the command jumps once, on joint 2, to where the hand holds the
        # arm (0.3 rad beyond it, less the command's lead over the arm); the other
        # joints jump to where the arm is, which their lag explains: within the range
        # of their commands of the last 4 x servo_lag (0.15 s), widened by
        # resync_tolerance (0.1 rad), the node's own rule. (A fixed 0.05 rad failed on
        # a slow CI host: 0.083 rad on joint 1, its servo lag at full speed plus a late
        # joint state.) The streams before and after the jump keep the limits.
        k, step = largest_jump(loop.commands)
        assert 0.05 < abs(step[1]) < 0.4, step
        stamp = loop.commands[k].stamp
        # The node's window ends at the measured state's stamp, at most
        # feedback_timeout (0.1 s) before the jump: 0.2 s more is taken.
        recent = np.array([c.q for c in loop.commands[:k] if c.stamp >= stamp - 0.8e9])
        lag_range = recent.max(axis=0) - recent.min(axis=0) + 0.1
        assert np.all(np.delete(step - lag_range, 1) <= 1e-9), (step, lag_range)
        try:
            check_commands(loop.commands[:k], chain)
            check_commands(loop.commands[k:], chain)
        except AssertionError as failed:   # say whether a second resync made the step
            after = loop.commands[k:]
            steps = [round(float(np.max(np.abs(b.q - a.q))), 4) for a, b in zip(after, after[1:])]
            raise AssertionError(
                f'{failed}; resyncs {loop.node.diagnostic("feedback_resyncs")}, the jump at '
                f'{k} of {len(loop.commands)} commands, the largest steps after it (max over '
                f'joints): {sorted(steps)[-5:]}') from failed
    finally:
        assert loop.stop() == 0


def test_stale_feedback_holds_the_commands_and_fresh_feedback_resumes_them():
    chain = chain_of('iiwa14')
    loop = Loop('iiwa14', 'joint_trajectory', lag=0.02)
    try:
        loop.node.ready(60.0)
        # Commands flow before the pause (else nothing is held, nothing compared).
        assert loop.flowing(loop.pause_pub)
        loop.pause_pub.publish(Bool(data=True))
        loop.node.spin(0.5)   # well past feedback_timeout (0.1 s)
        held_from = len(loop.commands)
        loop.node.send(far_target(chain, MOCK_START['iiwa14'], [0.3] * 7))
        loop.node.spin(1.0)
        assert len(loop.commands) == held_from, 'the node commanded without fresh feedback'
        loop.node.diagnostics.clear()
        assert loop.node.wait(lambda: (loop.node.diagnostic('feedback') or '').startswith(
            'stale'), 5.0)
        loop.pause_pub.publish(Bool(data=False))
        target = far_target(chain, MOCK_START['iiwa14'], [0.3] * 7)
        assert loop.arrives(target), loop.explain()
        # Resumed from the measured state: no jump between the last command before the
        # pause and the first after it (the arm had not moved).
        resumed = loop.commands[held_from]
        assert np.max(np.abs(resumed.q - loop.commands[held_from - 1].q)) < 0.01
        check_commands(loop.commands, chain)
    finally:
        assert loop.stop() == 0


@pytest.mark.timely
def test_feedback_lost_mid_motion_stops_a_forward_controller_along_the_tail():
    """Issue 21, defect 3: with no state the node sent nothing; the controller held (a hard stop).

    position_array, the joint states paused 0.5 s while a joint moves at 0.4
    rad/s or more: what the stand-in writes slows down before it stands still
    (a held array stops it at once: its speed just before standing still is
    the full speed). Judged over 40 ms: the arrays reach the controller with
    DDS timing jitter. The states back, the arm goes on to the target.

    The stop judged is the last one: where the written command last changed.
    A gap of 40 ms or more in the node's arrays (a stalled tick on a shared
    host; one in a quiet CI run) holds the array for ten updates mid-motion:
    that is the documented ``array_stalls`` rule of a forward controller (it
    moves only while arrays come), after which the plan restarts from rest and
    the feedback-lost tail still has to brake the arm gently.
    """
    chain = chain_of('iiwa14')
    loop = Loop('iiwa14', 'position_array', lag=0.02)

    try:
        loop.node.ready(60.0)
        target = far_target(chain, MOCK_START['iiwa14'], [0.6, -0.4, 0.5, 0.4, -0.5, 0.4, 0.6])
        loop.node.send(target)
        assert loop.flowing(loop.pause_pub)
        assert loop.node.wait(lambda: len(loop.written) > 10 and
                              speed(loop.written[-11:]) > 0.4, 10.0), 'never fast'
        paused_at = len(loop.written)
        loop.pause_pub.publish(Bool(data=True))
        loop.node.spin(0.6)
        during = loop.written[paused_at:]
        q = np.array([w[1] for w in during])
        still = final_rest(q)
        assert len(q) - still >= 10, 'the written command never came to rest\n' + loop.explain()
        assert still >= 10, ('the written command stood still at once: a hard stop\n'
                             + loop.explain())
        assert speed(during[still - 10:still + 1]) < 0.1, (
            f'{speed(during[still - 10:still + 1])} rad/s just before rest\n' + loop.explain())
        loop.pause_pub.publish(Bool(data=False))
        assert loop.arrives(target), loop.explain()
        assert loop.rejected == []
    finally:
        assert loop.stop() == 0


def test_feedback_with_joint_states_output_is_refused_at_start_up():
    env = dict(os.environ, ROS_DOMAIN_ID=str(unique_domain_id()))
    args = [sys.executable, '-m', 'ik_node.ros.entry', '--ros-args']
    for key, value in dict(model_params('iiwa14'), feedback_topic='/joint_states').items():
        args += ['-p', f'{key}:={value}']
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "joint_states belongs to the robot's broadcaster" in result.stderr
    assert 'Traceback' not in result.stderr


def test_a_twist_moves_the_tip_and_the_arm_stops_when_twists_stop():
    chain = chain_of('iiwa14')
    node = NodeUnderTest(dict(model_params('iiwa14'),
                              initial_positions='[0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]'))
    pub = node.client.create_publisher(TwistStamped, '/ik_node/target_twist', 10)
    try:
        node.ready(60.0)
        start = forward(chain, node.joints[-1].position)[:3, 3]
        first = time.monotonic()
        while time.monotonic() < first + 1.0:  # 1 s at 5 cm/s along -z of the base, 50 Hz
            msg = TwistStamped()
            msg.header.frame_id = 'iiwa_link_0'
            msg.twist.linear.z = -0.05
            pub.publish(msg)
            last = time.monotonic()
            node.spin(0.02)
        # Twists stopped: after twist_timeout the arm comes to rest (within the limits).
        assert node.wait(lambda: len(node.joints) > 2 and np.all(
            np.array(node.joints[-1].velocity) == 0.0), 5.0)
        moved = forward(chain, node.joints[-1].position)[:3, 3] - start
        # The last twist holds until twist_timeout: at most (sent for + timeout) x
        # speed, plus the few millimetres of braking; at least most of the sent time.
        sent_for = last - first
        most = 0.05 * (sent_for + TrackerConfig().twist_timeout) + 0.005
        assert -most < moved[2] < -0.6 * 0.05 * sent_for, (moved, sent_for)
        assert np.hypot(moved[0], moved[1]) < 0.005, moved
        check_joint_stream(chain, node.joints, accel=ACCEL)
    finally:
        assert node.stop() == 0


def test_a_twist_flood_is_one_unbroken_stream():
    """Issue 21, defect 6: a flood (thousands of twists a second) caused dead-man stops.

    Only the newest twist matters: the node keeps one, the rest are replaced
    unread and counted (twists_dropped_unread). During an unbroken flood the
    dead-man never fires and the tip moves at the twist's speed.
    """
    chain = chain_of('iiwa14')
    node = NodeUnderTest(dict(model_params('iiwa14'),
                              initial_positions='[0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]'))
    flooder = None
    try:
        node.ready(60.0)
        start = forward(chain, node.joints[-1].position)[:3, 3]
        flooder = subprocess.Popen(
            [sys.executable, str(TEST / 'helpers' / 'twist_flooder.py'), '3.0',
             'iiwa_link_0', '-0.03'], env=dict(os.environ, ROS_DOMAIN_ID=str(node.domain)),
            stdout=subprocess.PIPE, text=True)
        assert node.wait(lambda: flooder.poll() is not None, 40.0)
        sent = json.loads(flooder.stdout.read().strip().splitlines()[-1])
        node.spin(0.5)   # past twist_timeout: the dead-man of the flood's end has fired
        node.diagnostics.clear()
        assert node.wait(lambda: node.diagnostic('twists_dropped_unread') is not None, 5.0)
        # Unbroken: the one dead-man stop is the flood's end, none during it,
        # where the flood was unbroken and the node on time. A busy machine may
        # pause the flooder (its long_gaps) or the node (ticks_late: a tick
        # more than two periods after the last): a stop for each is right.
        excused = sent['long_gaps'] + int(node.diagnostic('ticks_late'))
        timeouts = int(node.diagnostic('twist_timeouts'))
        assert 1 <= timeouts <= 1 + excused, (timeouts, sent, node.diagnostic('ticks_late'))
        received = int(node.diagnostic('twists_received'))
        dropped = int(node.diagnostic('twists_dropped_unread'))
        assert 0 < received < sent['sent'] and dropped > 0, (received, dropped, sent)
        moved = forward(chain, node.joints[-1].position)[:3, 3] - start
        assert moved[2] < -0.6 * 0.03 * 3.0, moved
        check_joint_stream(chain, node.joints, accel=ACCEL)
    finally:
        if flooder is not None and flooder.poll() is None:
            flooder.kill()
            flooder.wait(timeout=5)
        assert node.stop() == 0


def test_a_target_in_the_tool_frame_moves_the_tool_along_itself():
    chain = chain_of('iiwa14')
    node = NodeUnderTest(dict(model_params('iiwa14'),
                              initial_positions='[0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]'))
    try:
        node.ready(60.0)
        q_start = np.array(node.joints[-1].position)
        msg = PoseStamped()
        msg.header.frame_id = 'tool0'
        msg.pose.position.z = 0.05           # 5 cm along the tool's own z
        msg.pose.orientation.w = 1.0
        node.target_pub.publish(msg)
        local = np.eye(4)
        local[2, 3] = 0.05
        target = forward(chain, q_start) @ local
        assert node.wait(lambda: max(np.array(pose_errors(
            chain, np.array(node.joints[-1].position), target)) / [1e-4, 1e-3]) <= 1.0, 30.0)
    finally:
        assert node.stop() == 0


def divided_accelerations(samples):
    """Accelerations (k, n) of (time, positions) samples by second divided differences.

    Twice f[t0, t1, t2] is the acceleration at some instant in [t0, t2] for any
    C2 motion (mean value theorem), whatever the spacing of the times.
    """
    t = np.array([s[0] for s in samples])
    q = np.array([s[1] for s in samples])
    v = np.diff(q, axis=0) / np.diff(t)[:, None]
    return 2.0 * np.diff(v, axis=0) / (t[2:] - t[:-2])[:, None]


@pytest.mark.timely
@pytest.mark.parametrize('output', ['joint_trajectory', 'position_array'])
def test_a_node_killed_mid_motion_stops_the_arm_within_the_limits(output):
    """SIGINT mid-motion: the arm brakes along the plan's tail to rest, the node exits 0.

    joint_trajectory: the controller plays the last message's tail; judged on
    what the stand-in wrote after the signal (one message sampled on the
    controller's clock: a C2 motion, so divided differences are exact): the
    accelerations within the limit, then rest. position_array: the
    node sends the tail on its array timer before it exits (the forward
    controller would hold the last array); over DDS the two timers beat, so
    the accelerations are judged without DDS (test_hardware.py) and here the
    braking: motion goes on after the signal, then rest.

    Both are 'timely'. joint_trajectory_controller bridges from the measured
    state to a new message's first point, so the message must arrive before
    that point. In CI's loaded pass (three hogs), the last message of a node
    starved around the signal arrived too late for that. The controller then
    bridged in 57 ms, at 6.0 rad/s^2 against 5 (fresh clone of 5bf12eb). That
    is the documented 'timely' rule (doc/real-arms.md), not a tail the node
    planned. The kill with late and stalled messages is judged on simulated
    clocks in test/simulation/test_hardware.py (scenario 'kill').
    """
    chain = chain_of('iiwa14')
    loop = Loop('iiwa14', output)
    try:
        loop.node.ready(60.0)
        # Killed while the client sees the arm fast (>= 0.3 rad/s: braking from
        # there takes >= 9 mrad). A client starved by a loaded machine may not
        # look until the arm has arrived: then the arm goes back and it tries again.
        targets = [far_target(chain, MOCK_START['iiwa14'], [0.8, -0.6, 0.7, 0.6, -0.7, 0.6, 0.8]),
                   chain.forward(np.array(MOCK_START['iiwa14']))]
        for attempt in range(4):
            seen = len(loop.written)
            loop.node.send(targets[attempt % 2])
            moving = loop.node.wait(lambda: len(loop.written) > seen + 5 and
                                    speed(loop.written[-5:]) > 0.3, 20.0)
            if moving:
                break
        assert moving, 'never seen moving fast\n' + loop.explain()
        killed_at = len(loop.written)   # what the client has seen, current to ~10 ms
        loop.node.proc.send_signal(signal.SIGINT)
        assert loop.node.proc.wait(timeout=10) == 0
        loop.node.spin(1.5)   # the stand-in plays the tail meanwhile
        after = loop.written[killed_at - 1:]
        assert len(after) > 20
        if output == 'joint_trajectory':
            a = divided_accelerations(after)
            worst = int(np.argmax(np.max(np.abs(a), axis=1)))
            assert np.max(np.abs(a)) <= ACCEL * 1.05, (
                f'{np.max(np.abs(a)):.3g} rad/s^2 at sample {worst} of {len(after)} after the '
                f'last seen before the signal, t = {after[worst][0] - after[0][0]:.3f} s; '
                f'times {[round(w[0] - after[0][0], 3) for w in after[max(0, worst - 3):][:7]]}'
                f'\n' + loop.explain())
        last = np.array([w[1] for w in after[-10:]])
        assert np.all(last == last[0]), 'not at rest 1.5 s after the node stopped'
        moved = np.max(np.abs(after[-1][1] - after[0][1]))
        assert moved > 1e-3, 'the arm stopped in place: no braking tail was played'
        # Refused only what came later than the budget (README file: 0.03 s), as
        # upstream does, while the tail above is still played within the limits.
        # Seen beside CI's CPU hogs (twice, once per run) and in a quiet CI run
        # (three in a row, the node's ticks on time).
        assert_refused_only_when_late(loop, 0.03)
    finally:
        assert loop.stop() == 0


@pytest.mark.timely
def test_with_use_sim_time_the_stream_drives_a_simulated_controller():
    """use_sim_time: stamps on the simulator's /clock; every message accepted, targets reached.

    'timely': every message is accepted while it reaches the controller within
    command_latency_budget; beside four CPU hogs six arrived later and the
    controller refused them, as upstream does ('ends in the past'). With the
    bundled 0.03 s (a message at rest ends 0.06 s after its stamp) two were
    refused once in a CI run with nothing else running, never in 10 runs
    here, quiet or beside a hog: this VM stalls a process for 60 ms now and
    then. The budget here is 0.05 s, as for the controller clock ahead
    (doc/real-arms.md: size the budget for the machine). A quiet CI run
    (ci59) still saw one message arrive 142 ms of simulated time after its
    stamp (the node's ticks on time): what is asserted is the guarantee,
    every message within the budget accepted (assert_refused_only_when_late).
    """
    chain = chain_of('iiwa14')
    loop = Loop('iiwa14', 'joint_trajectory', node_params={'use_sim_time': True},
                sim_clock=True, budget=0.05)
    try:
        loop.node.ready(60.0)
        # Joint states are stamped with simulated time (from 100 s), not the wall clock.
        assert stamp_ns(loop.node.joints[-1]) < 10_000 * 1_000_000_000
        target = far_target(chain, MOCK_START['iiwa14'], [0.3, -0.3, 0.2, 0.3, -0.2, 0.3, 0.2])
        loop.node.send(target)
        assert loop.arrives(target), loop.explain()
        assert len(loop.written) > 10, loop.explain()
        assert_refused_only_when_late(loop, 0.05)
        # The node's messages are stamped on the same simulated clock.
        assert all(c.stamp < 10_000 * 1_000_000_000 for c in loop.commands)
    finally:
        assert loop.stop() == 0


@pytest.mark.timely
@pytest.mark.parametrize('offset, budget', [(-0.025, 0.03), (0.02, 0.05)])
def test_a_controller_on_a_clock_of_its_own_keeps_the_limits(offset, budget):
    """The controller's clock 25 ms behind / 20 ms ahead of the node's, within the budget.

    A clock ahead takes its offset from command_latency_budget, which must
    also cover transport and late ticks (README): 20 ms ahead with a 50 ms
    budget. With the default 30 ms, the 10 ms left was exceeded once on a
    quiet machine (5.39 rad/s^2, issue 30's first CI run) and often beside
    four CPU hogs (107 rad/s^2): messages beyond the budget, as the README
    says. 'timely': a machine kept busy on purpose exceeds any such margin.
    A clock behind takes nothing from it: the default budget. It is 'timely'
    too: beside CI's three hogs, a message later than the budget gave
    12.9 rad/s^2 (fresh clone of e84e713). What joint_trajectory_controller
    writes depends on when the messages arrive; the node's commands do not,
    and the loaded pass judges those (check_joint_stream).

    Judged on what the stand-in wrote, on its own clock, by divided
    differences (exact for a C2 motion whatever the load): accelerations
    within the limit while the arm moves to a far target and stops there.
    Before issue 29, a clock 12 ms behind gave 274x the limit here: each
    message began in the controller's future, splined from its own state.
    """
    chain = chain_of('iiwa14')
    loop = Loop('iiwa14', 'joint_trajectory', clock_offset=offset, rate=500.0, budget=budget)
    try:
        loop.node.ready(60.0)
        target = far_target(chain, MOCK_START['iiwa14'], [0.4, -0.3, 0.3, 0.4, -0.3, 0.4, 0.3])
        loop.node.send(target)
        assert loop.arrives(target), loop.explain()
        loop.node.spin(0.3)
        a = divided_accelerations(loop.written)
        assert np.max(np.abs(a)) <= ACCEL * 1.05, np.max(np.abs(a))
        assert len(loop.written) > 100
    finally:
        assert loop.stop() == 0
