# SPDX-License-Identifier: Apache-2.0

"""The example ros2_control configurations agree with the bundled arms and with the node.

A controller config whose joints differ from the URDF's, or a command topic
no controller listens on, fails only on the user's machine; here it fails
at once. (Whether the node accepts its parameter file is tested by running
it: test/system/test_real_arm.py starts the node with it.)
"""

from pathlib import Path

from ik_node.core.model.chain import Chain
from ik_node.ros.node import OUTPUTS
from node_process import ARMS
import pytest
import yaml

CONFIG = Path(__file__).resolve().parents[2] / 'config'
TYPES = {'joint_state_broadcaster': 'joint_state_broadcaster/JointStateBroadcaster',
         'joint_trajectory_controller': 'joint_trajectory_controller/JointTrajectoryController',
         'forward_position_controller': 'position_controllers/JointGroupPositionController'}


def load(path):
    """Return a YAML file's content."""
    with open(path, encoding='utf-8') as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize('arm', sorted(ARMS))
def test_the_controllers_command_the_bundled_arms_joints(arm):
    path, base, tip = ARMS[arm]
    chain = Chain.from_urdf_file(str(path), base, tip)
    config = load(CONFIG / 'ros2_control' / f'{arm}_controllers.yaml')
    manager = config['controller_manager']['ros__parameters']
    for name, kind in TYPES.items():
        assert manager[name]['type'] == kind
    jtc = config['joint_trajectory_controller']['ros__parameters']
    assert jtc['joints'] == chain.joint_names
    assert jtc['command_interfaces'] == ['position']
    # ik_node's messages end at rest: the controller's default (false) stands.
    assert jtc.get('allow_nonzero_velocity_at_trajectory_end', False) is False
    assert jtc.get('interpolate_from_desired_state', False) is False
    fpc = config['forward_position_controller']['ros__parameters']
    assert fpc['joints'] == chain.joint_names   # the node's default command_joint_order


@pytest.mark.parametrize('output', ['joint_trajectory', 'position_array'])
def test_one_node_parameter_file_per_output_names_its_controller(output):
    """Each file selects its output; its topic is the output's default, that controller's."""
    params = load(CONFIG / 'ros2_control' / f'ik_node_{output}.yaml')['/**']['ros__parameters']
    assert params['feedback_topic'] == '/joint_states'
    assert params['command_output'] == output
    topic = params.get('command_topic') or OUTPUTS[output][1]
    assert topic == OUTPUTS[output][1]
    assert topic.split('/')[1] in TYPES
    assert 0.0 <= params['command_latency_budget'] <= 1.0


@pytest.mark.parametrize('arm', ['iiwa14', 'ur5e'])
def test_position_arrays_are_sent_at_the_controller_managers_rate(arm):
    """forward_position_controller does not interpolate: the node sends at its update_rate."""
    params = load(CONFIG / 'ros2_control' / 'ik_node_position_array.yaml')['/**'][
        'ros__parameters']
    manager = load(CONFIG / 'ros2_control' / f'{arm}_controllers.yaml')['controller_manager']
    assert params['controller_rate'] == manager['ros__parameters']['update_rate']


def test_the_two_arm_controllers_command_what_the_node_sends_each():
    """iiwa14_dual: each arm's controller listens on the topic and joints the node gives it."""
    from ik_node.core.ik.stacked import EndEffector, JointUnion
    from ik_node.ros.group import command_groups
    params = load(CONFIG / 'iiwa14_dual.yaml')['/**']['ros__parameters']
    urdf = CONFIG.parent / 'urdf' / 'iiwa14_dual.urdf'
    chains = [Chain.from_urdf_file(str(urdf), params['base_link'], params[f'{name}.tip_link'])
              for name in params['end_effectors']]
    union = JointUnion(chains)
    groups = command_groups([EndEffector(n, c) for n, c in zip(params['end_effectors'], chains)],
                            union)
    config = load(CONFIG / 'ros2_control' / 'iiwa14_dual_controllers.yaml')
    manager = config['controller_manager']['ros__parameters']
    for name, group in zip(params['end_effectors'], groups):
        topic = params[f'{name}.command_topic']
        controller = topic.split('/')[1]
        assert manager[controller]['type'] == TYPES['joint_trajectory_controller']
        assert config[controller]['ros__parameters']['joints'] == [union.names[k] for k in group]
    assert sorted(k for g in groups for k in g) == list(range(union.n))
