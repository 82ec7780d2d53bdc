# SPDX-License-Identifier: Apache-2.0

"""Configurations the node refuses at start-up: exit code 1 and one line saying why.

ik_node's main runs in this process (helpers/node_process.start_in_process),
as the executable runs it, on a ROS domain of its own; the executable itself
(exit code, no traceback on stderr) is run by test/system/test_hardening.py.
Every malformed description's reason is also checked at the library level
(test/unit/test_urdf.py).
"""

import os
import re

from node_process import model_params, start_in_process
import pytest
from ros_helpers import unique_domain_id
from urdf_cases import CASES, CORPUS

# colcon test in CI runs these (the install space refuses as the checkout does).
pytestmark = pytest.mark.smoke


def start(params, capfd):
    """Run main with ``params`` on a fresh domain; return (exit code, stderr)."""
    return start_in_process(params, capfd, unique_domain_id())


@pytest.mark.parametrize('name, base, tip, pattern', CASES, ids=[c[0] for c in CASES])
def test_malformed_urdf_stops_the_node_at_start_up_with_the_reason(name, base, tip, pattern,
                                                                   capfd):
    code, output = start({'urdf_path': str(CORPUS / name), 'base_link': base, 'tip_link': tip},
                         capfd)
    assert code == 1, output
    assert re.search(pattern, output), output
    assert 'Traceback' not in output


def test_main_returns_in_a_process_that_goes_on_after_ompl_is_loaded(capfd):
    # The console script ends without finalizing once OMPL's bindings are
    # loaded (their leak report); main called in a process that goes on (a
    # pytest worker) must return instead: os._exit there killed 16 workers.
    pytest.importorskip('ompl')
    code, output = start({'urdf_path': str(CORPUS / 'cycle.urdf'), 'base_link': 'base',
                          'tip_link': 'b'}, capfd)
    assert code == 1, output


def test_a_10_mb_urdf_is_refused_at_start_up(tmp_path, capfd):
    big = tmp_path / 'big.urdf'
    body = ''.join(f'<link name="l{k}"/>' for k in range(500_000))
    big.write_text(f'<robot name="big">{body}</robot>')
    assert big.stat().st_size > 10e6
    code, err = start({'urdf_path': str(big), 'base_link': 'l0', 'tip_link': 'l1'}, capfd)
    assert code == 1
    assert 'is above the 4,000,000-byte limit' in err, err


@pytest.mark.parametrize('params, message', [
    ({'publish_rate': 5000.0}, 'publish_rate'),
    ({'max_linear_speed': -1.0}, 'max_linear_speed'),
    ({'target_queue_depth': 0}, 'target_queue_depth'),
    ({'initial_positions': '[0.0, 9.0, 0.0, 0.0, 0.0, 0.0, 0.0]'}, 'initial_positions'),
    ({'initial_positions': '[0.0, 0.0]'}, 'initial_positions'),
    ({'command_topic': 'bad topic!'}, "parameter command_topic: 'bad topic!' is not a valid"),
    ({'command_output': 'joint_trajectory', 'feedback_topic': '1st/joint_states'},
     "parameter feedback_topic: '1st/joint_states' is not a valid topic name"),
    ({'joint_acceleration_limits': '[5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 1.0e-300]'},
     'joint_acceleration_limits'),
])
def test_parameters_out_of_range_stop_the_node_at_start_up(params, message, capfd):
    code, err = start(dict(model_params('iiwa14'), **params), capfd)
    assert code == 1 and message in err and 'Traceback' not in err, err
    # One line says why (the log lines before it are the node's start-up).
    assert len([line for line in err.splitlines()
                if 'cannot start' in line or line.startswith(' ')]) == 1, err


def test_a_fifo_as_urdf_path_is_refused_at_start_up(tmp_path, capfd):
    fifo = tmp_path / 'robot.urdf'
    os.mkfifo(fifo)    # opening it for reading would wait for a writer forever
    code, err = start(dict(model_params('iiwa14'), urdf_path=str(fifo)), capfd)
    assert code == 1, err
    assert 'robot.urdf: not a regular file' in err, err


@pytest.mark.parametrize('params, message', [
    ({'solver': 'magic'}, "solver: 'magic' is not one of auto, analytic, jacobian"),
    ({'tip_link': 'nowhere'}, "tip_link 'nowhere' is not a link"),
    ({'publish_rate': 0.0}, 'publish_rate'),
])
def test_bad_configuration_exits_non_zero_with_a_clear_message(params, message, capfd):
    code, err = start(dict(model_params('iiwa14'), **params), capfd)
    assert code == 1 and message in err and 'Traceback' not in err, err
