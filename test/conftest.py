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

"""Shared pytest configuration: markers and the hypothesis profile."""

import os
import sys

from hypothesis import Phase, settings

sys.path.insert(0, os.path.dirname(__file__))

# Seeded and reproducible: the same examples on every run and in CI.
# No 'explain' phase: it traces every line (sys.settrace), which slows the
# first numba compilation inside a test by ~30x.
settings.register_profile('ik_node', derandomize=True, deadline=None, print_blob=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target,
                                  Phase.shrink])
settings.load_profile('ik_node')


def pytest_configure(config):
    """Register the test tiers and the ament linter markers used by the lint tests."""
    config.addinivalue_line('markers', 'integration: starts ROS nodes over DDS or subprocesses '
                                       '(the fast tier is -m "not integration and not slow")')
    config.addinivalue_line('markers', 'slow: takes more than a few seconds (long property '
                                       'tests, builds, soak and flood runs)')
    config.addinivalue_line('markers', 'timely: asserts what needs the node on time (a forward '
                                       "controller's braking tail; every message within "
                                       'command_latency_budget); skipped with '
                                       'IK_NODE_BUSY_MACHINE=1')
    for marker in ('linter', 'flake8', 'pep257', 'xmllint'):
        config.addinivalue_line('markers', f'{marker}: ament {marker} check')


def pytest_collection_modifyitems(config, items):
    """Skip the 'timely' tests on a machine CI keeps busy on purpose (IK_NODE_BUSY_MACHINE=1).

    forward_position_controller holds the last array it got: when the node
    stalls (a CPU starved by other processes), the arm stops as hard as its
    servo can and no node can prevent it; joint_trajectory_controller refuses
    a message that arrives after its end, i.e. later than the configured
    command_latency_budget. Every other guarantee is asserted on a busy
    machine too.
    """
    if os.environ.get('IK_NODE_BUSY_MACHINE') != '1':
        return
    import pytest
    skip = pytest.mark.skip(reason='needs the node on time: on a busy machine a forward '
                                   'controller holds while the node stalls, and messages '
                                   'arrive later than command_latency_budget')
    for item in items:
        if 'timely' in item.keywords:
            item.add_marker(skip)
