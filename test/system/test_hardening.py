# SPDX-License-Identifier: Apache-2.0

"""Hardening over real DDS: fuzzing, flooding, malformed models and parameters, shutdown."""

import json
import os
import re
import subprocess
import sys

from fuzzing import fuzz_then_reach
from geometry_msgs.msg import PoseStamped
from ik_node.bench.cli import main
from ik_node.bench.soak import soak
from ik_node.core.model.chain import Chain
from ik_node.ros.conversions import matrix_to_pose
from node_process import ARMS, in_process_node, model_params, NodeUnderTest
import numpy as np
import pytest
from rclpy.qos import DurabilityPolicy, QoSProfile
from ros_helpers import unique_domain_id, wait_until
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from urdf_cases import CASES, CORPUS

pytestmark = pytest.mark.integration


@pytest.mark.wallclock
def test_fuzzed_messages_are_counted_and_valid_targets_still_reached():
    """Five batches of malformed and hostile messages, each followed by a valid target.

    Every field type, NaN and infinite values, wrong frames and names, huge
    arrays (ik_node.bench.fuzz.message_batches). The sweep
    (test/sweeps/test_dds_sweeps.py) sends 50 batches drawn anew each run.
    """
    fuzz_then_reach(batches=5)


# -- malformed robot models ----------------------------------------------------------


def _start(params, timeout_s=60):
    cmd = [sys.executable, '-m', 'ik_node.ros.entry', '--ros-args']
    for key, value in params.items():
        cmd += ['-p', f'{key}:={value}']
    env = dict(os.environ, ROS_DOMAIN_ID=str(unique_domain_id()))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)


def test_a_malformed_urdf_and_a_bad_parameter_exit_1_with_one_line_and_no_traceback():
    """The executable's contract for a configuration it refuses: exit code 1, one line, why.

    Every refusal and its reason runs in-process (test/ros/test_start_up.py,
    through the same main); these two run the executable itself.
    """
    name, base, tip, pattern = CASES[1]
    result = _start({'urdf_path': str(CORPUS / name), 'base_link': base, 'tip_link': tip})
    output = result.stdout + result.stderr
    assert result.returncode == 1 and re.search(pattern, output), output
    assert 'Traceback' not in output
    result = _start(dict(model_params('iiwa14'), publish_rate=5000.0))
    output = result.stdout + result.stderr
    assert result.returncode == 1 and 'publish_rate' in output and 'Traceback' not in output
    assert len([line for line in result.stderr.splitlines()
                if 'cannot start' in line or line.startswith(' ')]) == 1, result.stderr


def test_a_misspelled_parameter_is_reported_with_the_closest_name():
    cmd = [sys.executable, '-m', 'ik_node.ros.entry', '--ros-args', '-p',
           'max_linear_sped:=0.3', '-p', 'solver:=magic']   # the second: exit at once
    env = dict(os.environ, ROS_DOMAIN_ID=str(unique_domain_id()))
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "parameter 'max_linear_sped' is not a parameter of ik_node and is ignored; did you " \
        "mean 'max_linear_speed'?" in result.stderr, result.stderr


def test_bad_robot_description_updates_are_refused_and_the_old_model_kept():
    path, base, tip = ARMS['iiwa14']
    node = NodeUnderTest({'base_link': base, 'tip_link': tip})
    try:
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        desc = node.client.create_publisher(String, '/robot_description', latched)
        desc.publish(String(data=path.read_text()))
        node.ready()
        # One at a time, as robot_state_publisher would send them: the topic keeps
        # only the newest description (depth 1), so a description published before
        # the node has read the previous one replaces it unread (a run beside two
        # CPU hogs counted 3 of 4 when they were sent 0.2 s apart).
        bad = ['not_xml.urdf', 'xxe_local_file.urdf', 'cycle.urdf', 'nan_axis.urdf']
        for count, name in enumerate(bad, start=1):
            desc.publish(String(data=(CORPUS / name).read_text()))
            assert node.wait(lambda: node.diagnostic('rejected_robot_description') == str(count),
                             30.0), (name, node.diagnostic('rejected_robot_description'))
        chain = Chain.from_urdf_file(str(path), base, tip)
        assert node.reaches(chain, [0.2, 0.7, 0.1, -1.0, 0.0, 0.6, 0.3])
    finally:
        assert node.stop() == 0


# -- shutdown, restart, callback errors ------------------------------------------------


# 'alone': the bench counts the /dev/shm files left behind; another worker's node
# killed with SIGKILL leaves its own there (5 counted in a CI run, issue 30).
@pytest.mark.alone
def test_signals_stop_the_moving_node_within_a_second_cleanly_and_a_restart_works(capsys):
    # One run per signal of ik_bench shutdown: mid-motion, stop, restart on the same domain.
    assert main(['shutdown', '--runs', '1', '--json']) == 0
    report = json.loads(capsys.readouterr().out)
    for name in ('SIGINT', 'SIGTERM'):
        run = report[name]
        # The stop time is a figure of `ik_bench shutdown`; the bench kills a node
        # that has not stopped after its bounded wait (then the exit code is not 0).
        assert run['exit_codes'] == [0], report
        # Every shared-memory file of the node and of the client is gone.
        assert run['shm_files_left'] == 0, report
        assert run['restarts_reaching_a_target'] == 1, report


def test_an_exception_in_a_callback_is_logged_counted_and_survived(monkeypatch):
    """A tick that raises at every call: each error logged and counted, the node goes on.

    The class's goal step is broken, not the instance's: the node replaces
    its tracker's solver by the compiled twin once the background compile is
    loaded (5 s beside CPU hogs), and an instance patched before that was
    swapped away with no error ever raised (a CI run beside two hogs, issue
    30). A solve that raises runs in the worker thread (issue 50): counted
    there (worker_errors in /diagnostics), answered with the arm held, and
    the ticks go on publishing.
    """
    from ik_node.core.motion.tracker import MotionTracker
    with in_process_node('iiwa14', publish_rate=200.0) as (node, client, spin_once):
        published = []
        original_publish = node.command_pub.publish
        node.command_pub.publish = lambda msg: (published.append(msg), original_publish(msg))

        def broken(*args, **kwargs):
            raise RuntimeError('injected failure')
        monkeypatch.setattr(MotionTracker, '_goal', broken)
        chain = node.session.tracker.chain
        goal = chain.forward(np.clip(node.session.tracker.q + 0.3, chain.lower, chain.upper))
        target = PoseStamped(pose=matrix_to_pose(goal))
        target.header.frame_id = chain.base_link
        pub = client.create_publisher(PoseStamped, '/ik_node/target_pose', 10)
        assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0, spin_once)
        pub.publish(target)
        assert wait_until(lambda: node.callback_errors >= 3, 30.0, spin_once)
        monkeypatch.undo()   # the class's own goal step again
        published.clear()
        assert wait_until(lambda: len(published) >= 5, 10.0, spin_once)
        assert all(np.all(np.isfinite(m.position)) for m in published)
        # The worker's solve raises: counted, and the ticks go on.
        errors = node.callback_errors
        monkeypatch.setattr(type(node.session.tracker.solver), 'solve', broken)
        goal = chain.forward(np.clip(node.session.tracker.q - 0.3, chain.lower, chain.upper))
        target.pose = matrix_to_pose(goal)
        pub.publish(target)
        assert wait_until(lambda: node.worker.errors >= 1, 30.0, spin_once)
        published.clear()
        assert wait_until(lambda: len(published) >= 5, 10.0, spin_once)
        assert node.callback_errors == errors
        assert all(np.all(np.isfinite(m.position)) for m in published)


def test_a_short_soak_has_no_failure_and_no_gross_leak():
    report = soak(minutes=0.5, seed=3, interval_s=10.0, domain=unique_domain_id())
    # The whole report on failure (ci69, beside two hogs: the node 'exited' and the
    # last target was missed, with nothing more to go on).
    assert not any(report['failures'].values()), {k: v for k, v in report.items() if k != 'rows'}
    # Every target is handled or counted: on a busy machine the keep-last queue may
    # drop a target of a 100 Hz stream before the node reads it (the newest wins, as
    # the README says); the node counts it. The last target is reached (failures).
    # How many targets 30 s hold depends on the machine (~2,000 quiet, 76 read
    # beside two CPU hogs): a stream was sent and read, however short.
    assert report['targets_sent'] > 1 and report['targets_received'] > 1, report
    assert report['targets_received'] + report['targets_dropped_unread'] == \
        report['targets_sent'], report
    # A gross leak only (~2,000 targets in 30 s); `ik_bench soak` measures the slope.
    assert report['rss_growth_after_first_interval_mib'] < 16.0, report['rows']
    assert report['joint_states'] > 0 and len(report['rows']) >= 3, report


def test_a_failing_service_or_parameter_callback_answers_with_the_error():
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger
    with in_process_node('iiwa14') as (node, client_node, spin_once):
        def broken(*args):
            raise RuntimeError('injected failure')
        node.session.tracker.reset = broken          # inside ~/reset
        node._solver_for = broken            # inside a 'solver' parameter change
        client = client_node.create_client(Trigger, '/ik_node/reset')
        assert wait_until(client.service_is_ready, 10.0, spin_once)
        future = client.call_async(Trigger.Request())
        assert wait_until(future.done, 10.0, spin_once)
        reply = future.result()
        assert not reply.success and 'injected failure' in reply.message
        result = node.set_parameters([Parameter('solver', value='jacobian')])[0]
        assert not result.successful and 'injected failure' in result.reason
        assert node.get_parameter('solver').value == 'auto'   # old value kept
        assert node.callback_errors == 2
        # Still running: the timer keeps publishing finite joint states.
        published = []
        client_node.create_subscription(JointState, '/joint_states', published.append, 10)
        assert wait_until(lambda: len(published) >= 3, 10.0, spin_once)
        assert all(np.all(np.isfinite(m.position)) for m in published)


def test_a_tick_caught_by_the_shutdown_logs_no_error():
    # Ctrl-C shuts the context down while a callback may be running: its publish
    # then raises "publisher's context is invalid" (seen in ~1 stop in 45). That is
    # the requested stop, not a failure: nothing logged as an error, nothing counted.
    with in_process_node('iiwa14') as (node, _, spin_once):
        spin_once(0.1)
        logged = []

        class Recorder:

            def __getattr__(self, level):
                return lambda text, **kwargs: logged.append((level, text))
        node.get_logger = Recorder
        (tick,) = [timer.callback for timer in node.timers]
        node.context.try_shutdown()
        tick()
        assert node.callback_errors == 0 and not [e for e in logged if e[0] == 'error'], logged
