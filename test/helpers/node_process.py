# SPDX-License-Identifier: Apache-2.0

"""The node as a test drives it: a subprocess with a client node, or IKNode in this process."""

import os
import signal
import subprocess
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from ik_node.ros.conversions import matrix_to_pose
from models import ARMS as MODELS
import numpy as np
from oracle import pose_errors
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from ros_helpers import in_process_ik_node, OutputDrain, unique_domain_id, wait_until
from sensor_msgs.msg import JointState

# The arms the node tests start: the analytic (iiwa14) and the Jacobian (ur5e) solver.
ARMS = {name: MODELS[name] for name in ('iiwa14', 'ur5e')}


class NodeUnderTest:
    """The node as a subprocess and a client node on a fresh ROS domain."""

    def __init__(self, params, namespace=None, extra_args=(), joint_topic=None, domain=None,
                 env=None, cwd=None):
        """Start the node with ``params`` (namespace, extra environment, folder); a client."""
        self.domain = unique_domain_id() if domain is None else domain
        env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain), PYTHONUNBUFFERED='1',
                   **(env or {}))
        args = [sys.executable, '-m', 'ik_node.ros.entry', '--ros-args']
        for key, value in params.items():
            args += ['-p', f'{key}:={value}']
        if namespace:
            args += ['-r', f'__ns:={namespace}']
        args += list(extra_args)
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, cwd=cwd,
                                     stderr=subprocess.STDOUT, text=True)
        self.drain = OutputDrain(self.proc.stdout)
        self.prefix = f'{namespace}/ik_node' if namespace else '/ik_node'
        self.joint_topic = joint_topic or (f'{namespace}/joint_states' if namespace
                                           else '/joint_states')
        self.context = Context()
        rclpy.init(context=self.context, domain_id=self.domain)
        self.client = rclpy.create_node('test_client', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.client)
        self.joints, self.diagnostics = [], []
        self.client.create_subscription(JointState, self.joint_topic, self.joints.append, 100)
        self.client.create_subscription(DiagnosticArray, '/diagnostics',
                                        self.diagnostics.append, 10)
        self.target_pub = self.client.create_publisher(PoseStamped,
                                                       f'{self.prefix}/target_pose', 10)

    def spin(self, seconds):
        """Process client callbacks for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)

    def wait(self, predicate, timeout_s):
        """Spin until ``predicate()`` holds or the time is up; return whether it held."""
        return wait_until(predicate, timeout_s, lambda p: self.executor.spin_once(timeout_sec=p))

    def ready(self, timeout_s=20.0):
        """Wait for joint states and for the target subscription to be matched."""
        assert self.wait(lambda: self.joints and self.target_pub.get_subscription_count() > 0,
                         timeout_s), self.output()

    def send(self, pose, frame=''):
        """Publish a 4x4 pose as the target."""
        msg = PoseStamped(pose=matrix_to_pose(pose))
        msg.header.frame_id = frame
        self.target_pub.publish(msg)

    def reaches(self, chain, q_goal, timeout_s=30.0):
        """Send the tip pose of ``q_goal``; return whether the arm gets within 1e-4 m of it."""
        target = chain.forward(np.asarray(q_goal, dtype=float))
        self.send(target)
        return self.wait(lambda: pose_errors(chain, np.array(self.joints[-1].position),
                                             target)[0] <= 1e-4, timeout_s)

    def diagnostic(self, key):
        """Return the newest diagnostics value for ``key`` (None if not seen)."""
        for array in reversed(self.diagnostics):
            for status in array.status:
                for kv in status.values:
                    if kv.key == key:
                        return kv.value
        return None

    def stop(self, sig=signal.SIGINT, timeout_s=10.0):
        """Signal the node, wait for it (bounded) and return its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=5)
        self.executor.shutdown(timeout_sec=1.0)
        self.client.destroy_node()
        rclpy.shutdown(context=self.context)
        if code != 0:
            print(self.drain.text())  # shown by pytest with the failure
        return code

    def output(self):
        """Return the node's output once it has exited."""
        if self.proc.poll() is None:
            return '(node still running)'
        return self.drain.text()


def stop_process(proc, timeout_s: float = 10.0) -> None:
    """Stop a helper process as a user would (SIGINT), killed when it does not end in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def model_params(name):
    """Return the parameters loading a bundled arm."""
    path, base, tip = ARMS[name]
    return {'urdf_path': str(path), 'base_link': base, 'tip_link': tip}


def in_process_node(arm, **params):
    """Run IKNode on a bundled arm in this process (ros_helpers.in_process_ik_node)."""
    return in_process_ik_node(dict(model_params(arm), **params))


def start_in_process(params, capfd, domain):
    """Run ik_node's main in this process with ``params`` (-p name:=value) on ``domain``.

    For configurations it refuses at start-up: returns (exit code, stderr).
    No signal handler is installed (a StopRequest is passed in); rclpy's
    default context is used and shut down by main, as in the executable.
    """
    from ik_node.ros import node as ros_node
    from ik_node.ros.spin import StopRequest
    args = ['ik_node', '--ros-args']
    for key, value in params.items():
        args += ['-p', f'{key}:={value}']
    old = os.environ.get('ROS_DOMAIN_ID')
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    try:
        code = ros_node.main(args, stop=StopRequest())
    finally:
        if old is None:
            del os.environ['ROS_DOMAIN_ID']
        else:
            os.environ['ROS_DOMAIN_ID'] = old
    return code, capfd.readouterr().err
