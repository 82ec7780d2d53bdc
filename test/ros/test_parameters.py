# SPDX-License-Identifier: Apache-2.0

"""The parameter table routes every run-time change somewhere (Param.group)."""

from dataclasses import fields
import inspect

from ik_node.core.motion.config import TrackerConfig
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.ros.parameters import FEEDBACK_PARAMETERS, group, PARAMETERS

GROUPS = {'config', 'jerk', 'feedback', 'collision', 'solver'}


def test_the_config_group_is_the_tracker_configuration():
    assert sorted(group('config')) == sorted(f.name for f in fields(TrackerConfig))


def test_every_parameter_settable_at_run_time_has_a_group_and_only_those():
    for p in PARAMETERS:
        if p.fixed:
            assert p.group == '', p.name    # read once at start-up: nothing to route
        else:
            assert p.group in GROUPS, p.name


def test_the_feedback_group_is_in_the_order_feedback_policy_configure_takes():
    taken = list(inspect.signature(FeedbackPolicy.configure).parameters)[1:]
    assert len(taken) == len(FEEDBACK_PARAMETERS)
    for parameter, argument in zip(FEEDBACK_PARAMETERS, taken):
        assert parameter.endswith(argument), (FEEDBACK_PARAMETERS, taken)
