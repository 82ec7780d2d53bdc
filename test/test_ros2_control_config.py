# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""The example ros2_control configurations agree with the bundled arms and with the node.

A controller config whose joints differ from the URDF's, or a command topic
no controller listens on, fails only on the user's machine; here it fails
at once. (Whether the node accepts its parameter file is tested by running
it: test/test_real_arm.py starts the node with it.)
"""

from pathlib import Path

from ik_node.core.chain import Chain
from ik_node.ros.node import OUTPUTS
import pytest
from test_node import ARMS
import yaml

CONFIG = Path(__file__).resolve().parents[1] / 'config'
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
    # One streamed point ends with the arm moving: Jazzy and later reject it otherwise.
    assert jtc['allow_nonzero_velocity_at_trajectory_end'] is True
    fpc = config['forward_position_controller']['ros__parameters']
    assert fpc['joints'] == chain.joint_names   # the node's default command_joint_order


def test_the_node_parameters_name_a_controller_topic_and_the_broadcasters_joint_states():
    params = load(CONFIG / 'ros2_control' / 'ik_node_ros2_control.yaml')['/**']['ros__parameters']
    assert params['feedback_topic'] == '/joint_states'
    output = params['command_output']
    assert output in OUTPUTS and output != 'joint_states'
    assert params['command_topic'] == OUTPUTS[output][1]
    controller = params['command_topic'].split('/')[1]
    assert controller in TYPES
