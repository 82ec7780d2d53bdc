# SPDX-License-Identifier: Apache-2.0

"""Two arms on one torso driven by one node over DDS, into two controllers (issue 52).

ik_node runs as a subprocess with the parameters the launch file gives it
for ``robot:=iiwa14_dual params_file:=config/ros2_control/ik_node_joint_trajectory.yaml``
(config/iiwa14_dual.yaml, the URDF, the floor obstacle, then the ros2_control
file), commanding a stand-in controller manager in another process
(test/helpers/controller_standin.py ``--group``): one emulated
joint_trajectory_controller per arm on mock hardware, each on its own
topic, and one joint_state_broadcaster of every joint, which the node
follows. The same with ``ik_node_position_array.yaml`` and each arm's
forward_position_controller topic set (``<name>.command_topic``). Judged
on what the controllers wrote and broadcast, by the raw description's own
forward kinematics (oracle.RawModel):

* both hands reach their targets together, the shared torso one joint;
* each controller gets its own joints only, and refuses nothing;
* every written position is within the limits;
* each end effector's verdict in /diagnostics is 'arrived';
* the node exits cleanly.
"""

import os
from pathlib import Path
import subprocess
import sys

from geometry_msgs.msg import PoseStamped
from ik_node.core.ik.stacked import JointUnion
from ik_node.description.urdf import chain_from_urdf_file
from ik_node.ros.conversions import matrix_to_pose
from models import TEST
from node_process import NodeUnderTest, stop_process
import numpy as np
from oracle import RawModel
import pytest
from ros_helpers import OutputDrain, unique_domain_id
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.wallclock]

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / 'urdf' / 'iiwa14_dual.urdf'
CONFIG = ROOT / 'config' / 'iiwa14_dual.yaml'
MOCK = TEST / 'helpers' / 'controller_standin.py'
PARAMS = yaml.safe_load(CONFIG.read_text())['/**']['ros__parameters']
NAMES = PARAMS['end_effectors']
# Met: by the oracle's FK of the broadcast joints (m, rad).
MET_M, MET_RAD = 1e-4, 1e-3
# position_array: each arm's forward_position_controller.
ARRAY_TOPICS = {'left': '/left_forward_controller/commands',
                'right': '/right_forward_controller/commands'}


def union_of():
    chains = [chain_from_urdf_file(str(URDF), PARAMS['base_link'], PARAMS[f'{n}.tip_link'])
              for n in NAMES]
    return chains, JointUnion(chains)


def angle(a, b):
    r = a[:3, :3].T @ b[:3, :3]
    return float(np.arccos(np.clip(0.5 * (np.trace(r) - 1.0), -1.0, 1.0)))


class TwoArms:
    """The node and a two-controller stand-in on one fresh domain, with the node's client."""

    def __init__(self, start, output='joint_trajectory', folder=None):
        """Start the stand-in at ``start`` (N,) and the node as the launch file would.

        ``position_array``: a user's params file in ``folder`` sets each arm's
        forward controller topic, after the bundled ones.
        """
        self.chains, self.union = union_of()
        left_n = len(self.chains[0].joint_names)
        domain = unique_domain_id()
        self.topics = {n: PARAMS[f'{n}.command_topic'] for n in NAMES} \
            if output == 'joint_trajectory' else ARRAY_TOPICS
        args = [sys.executable, str(MOCK), '--joints', *self.union.names, '--initial',
                *(str(v) for v in start), '--mode',
                'trajectory' if output == 'joint_trajectory' else 'position',
                '--group', self.topics['left'], str(left_n),
                '--group', self.topics['right'], str(self.union.n - left_n)]
        self.mock = subprocess.Popen(args, env=dict(os.environ, ROS_DOMAIN_ID=str(domain)),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.mock_output = OutputDrain(self.mock.stdout)
        # As the launch file: the robot's config, then params_file, then the model and floor.
        extra = ['--params-file', str(CONFIG), '--params-file',
                 str(ROOT / 'config' / 'ros2_control' / f'ik_node_{output}.yaml')]
        params = {'urdf_path': str(URDF),
                  'obstacles_file': str(ROOT / 'config' / 'obstacles' / 'floor.yaml')}
        if output == 'position_array':
            mine = Path(folder) / 'arrays.yaml'
            mine.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
                f'{n}.command_topic': topic for n, topic in ARRAY_TOPICS.items()}}}))
            extra += ['--params-file', str(mine)]
        self.node = NodeUnderTest(params, extra_args=extra, joint_topic='/joint_states',
                                  domain=domain)
        client = self.node.client
        self.messages = {n: [] for n in NAMES}
        kind = JointTrajectory if output == 'joint_trajectory' else Float64MultiArray
        for n in NAMES:
            client.create_subscription(kind, self.topics[n], self.messages[n].append, 1000)
        self.written, self.rejected = [], []
        client.create_subscription(Float64MultiArray, '/controller_standin/written',
                                   lambda m: self.written.append(np.array(m.data[1:])), 10000)
        client.create_subscription(String, '/controller_standin/rejected',
                                   lambda m: self.rejected.append(m.data), 100)
        self.target_pubs = {n: client.create_publisher(PoseStamped,
                                                       f'/ik_node/{n}/target_pose', 10)
                            for n in NAMES}

    def measured(self):
        """Return the newest broadcast joints (N,), union order, looked up by name."""
        msg = self.node.joints[-1]
        where = {name: k for k, name in enumerate(msg.name)}
        return np.array([msg.position[where[n]] for n in self.union.names])

    def send(self, name, pose):
        """Publish a target (4, 4, base frame) for end effector ``name``."""
        msg = PoseStamped()
        msg.header.frame_id = PARAMS['base_link']
        msg.pose = matrix_to_pose(pose)
        self.target_pubs[name].publish(msg)

    def explain(self):
        """Return what a failed wait needs: the joints, refusals, both logs."""
        return (f'measured {self.measured() if self.node.joints else None}\n'
                f'rejected {self.rejected[-3:]}\nnode log:\n{self.node.drain.text()[-3000:]}\n'
                f'stand-in log:\n{self.mock_output.text()[-1500:]}')

    def stop(self):
        """Stop the node (its exit code returned) and the stand-in."""
        code = self.node.stop()
        stop_process(self.mock)
        return code


@pytest.mark.parametrize('output', ['joint_trajectory', 'position_array'])
def test_two_arms_on_a_torso_reach_their_targets_through_two_controllers(output, tmp_path):
    chains, union = union_of()
    raw = RawModel(URDF.read_text())
    initial = np.array(PARAMS['initial_positions'])
    start = initial + 0.05   # the stand-in starts off the node's initial positions
    rng = np.random.default_rng(52)
    goal = np.clip(initial + rng.uniform(-0.25, 0.25, union.n), union.lower, union.upper)
    values = dict(zip(union.names, goal))
    targets = {n: raw.pose(PARAMS['base_link'], PARAMS[f'{n}.tip_link'], values) for n in NAMES}
    loop = TwoArms(start, output, tmp_path)
    try:
        assert loop.node.wait(lambda: len(loop.node.joints) > 5 and all(
            p.get_subscription_count() > 0 for p in loop.target_pubs.values()), 60.0), \
            loop.explain()
        for n in NAMES:
            loop.send(n, targets[n])

        def arrived():
            q = dict(zip(union.names, loop.measured()))
            for n in NAMES:
                tip = raw.pose(PARAMS['base_link'], PARAMS[f'{n}.tip_link'], q)
                if np.linalg.norm(tip[:3, 3] - targets[n][:3, 3]) > MET_M or \
                        angle(tip, targets[n]) > MET_RAD:
                    return False
            return True
        assert loop.node.wait(arrived, 60.0), loop.explain()
        # Each end effector says so (diagnostics at 2 Hz).
        assert loop.node.wait(lambda: loop.node.diagnostics and all(
            s.message.endswith('arrived') for s in loop.node.diagnostics[-1].status), 10.0), \
            [s.message for s in loop.node.diagnostics[-1].status]
        assert sorted(s.message.split(':')[0] for s in loop.node.diagnostics[-1].status) == \
            sorted(NAMES)
        # Each controller got its own joints; none refused a message.
        left = [union.names[0]] + chains[0].joint_names[1:]
        right = chains[1].joint_names[1:]
        assert loop.messages['left'] and loop.messages['right']
        if output == 'joint_trajectory':
            assert all(list(m.joint_names) == left for m in loop.messages['left'])
            assert all(list(m.joint_names) == right for m in loop.messages['right'])
        else:   # arrays carry no names: the count, and the controllers refused none
            assert all(len(m.data) == len(left) for m in loop.messages['left'])
            assert all(len(m.data) == len(right) for m in loop.messages['right'])
        assert not loop.rejected, loop.explain()
        written = np.array(loop.written)
        assert len(written) > 100
        assert np.all(written >= union.lower - 1e-9) and np.all(written <= union.upper + 1e-9)
        assert not np.any(np.isnan(written))
    finally:
        code = loop.stop()
    assert code == 0, loop.explain()
