# SPDX-License-Identifier: Apache-2.0

"""The handles' policy in plain Python: whose feedback counts, drags, coalescing, markers."""

import math

from hypothesis import given, settings, strategies as st
from ik_node.core.motion.arrival import Arrival, Verdict
from ik_node.ros.conversions import matrix_to_pose
from ik_node.ros.handles import DRAG_IDLE_S, HandlePolicy, look_of, menu_entries, moved, \
    OTHER_CLIENT_S, POLE, pole_marker, TARGET, target_marker
import numpy as np
import pytest
import transforms3d
from visualization_msgs.msg import InteractiveMarkerControl as Control, \
    InteractiveMarkerFeedback as Feedback


def test_a_drag_runs_from_mouse_down_to_mouse_up_or_half_a_second_of_silence():
    policy = HandlePolicy((TARGET, POLE))
    assert not policy.dragging(TARGET, 0.0)
    assert policy.admit(TARGET, 'rviz', Feedback.MOUSE_DOWN, 0.0) is None
    assert policy.dragging(TARGET, 0.1) and not policy.dragging(POLE, 0.1)
    assert policy.admit(TARGET, 'rviz', Feedback.POSE_UPDATE, 0.4) is None
    assert policy.dragging(TARGET, 0.4 + DRAG_IDLE_S * 0.9)
    assert not policy.dragging(TARGET, 0.4 + DRAG_IDLE_S * 1.1)   # the window closed mid-drag
    policy.admit(TARGET, 'rviz', Feedback.POSE_UPDATE, 2.0)
    policy.admit(TARGET, 'rviz', Feedback.MOUSE_UP, 2.1)
    assert not policy.dragging(TARGET, 2.1)
    # A keep-alive does not start a drag; it keeps one going.
    policy.admit(TARGET, 'rviz', Feedback.KEEP_ALIVE, 3.0)
    assert not policy.dragging(TARGET, 3.0)


def test_another_clients_feedback_is_refused_for_a_second_as_upstream_does():
    policy = HandlePolicy((TARGET,))
    assert policy.admit(TARGET, 'rviz_a', Feedback.POSE_UPDATE, 10.0) is None
    assert policy.admit(TARGET, 'rviz_b', Feedback.POSE_UPDATE,
                        10.0 + 0.5 * OTHER_CLIENT_S) == 'marker_other_client'
    assert policy.admit(TARGET, 'rviz_a', Feedback.POSE_UPDATE, 10.6) is None
    assert policy.admit(TARGET, 'rviz_b', Feedback.POSE_UPDATE,
                        10.6 + 1.1 * OTHER_CLIENT_S) is None
    assert policy.counts == {'marker_other_client': 1}


def test_unknown_markers_and_events_are_refused_and_counted():
    policy = HandlePolicy((TARGET,))
    assert policy.admit('elbow', 'rviz', Feedback.POSE_UPDATE, 0.0) == 'marker_unknown'
    assert policy.admit(TARGET, 'rviz', 77, 0.0) == 'marker_event_unknown'
    assert policy.counts == {'marker_unknown': 1, 'marker_event_unknown': 1}
    assert not policy.dragging(TARGET, 0.0)


@settings(max_examples=50, deadline=None)
@given(offers=st.lists(st.sampled_from([TARGET, POLE, 'take']), max_size=60))
def test_the_newest_offer_is_taken_once_and_every_replaced_one_is_counted(offers):
    policy = HandlePolicy((TARGET, POLE))
    newest, offered, taken = {}, 0, 0
    for k, op in enumerate(offers):
        if op == 'take':
            for name in (TARGET, POLE):
                value = policy.newest(name)
                assert value == newest.pop(name, None)
                taken += value is not None
        else:
            policy.offer(op, k)
            newest[op] = k
            offered += 1
    pending = sum(policy.newest(name) is not None for name in (TARGET, POLE))
    assert taken + pending + policy.coalesced == offered


def test_the_look_follows_the_arms_arrival_verdict():
    assert look_of(None) == 'none'
    looks = {verdict: look_of(Arrival(verdict, '', 0.0, 0.0)) for verdict in Verdict}
    assert looks == {Verdict.ARRIVED: 'free', Verdict.ARRIVING: 'free',
                     Verdict.HELD: 'collision', Verdict.BLOCKED: 'collision',
                     Verdict.UNREACHABLE: 'unreachable', Verdict.NO_PATH: 'unreachable'}


@settings(max_examples=50, deadline=None)
@given(axis=st.tuples(*[st.floats(-1, 1)] * 3).filter(lambda a: np.linalg.norm(a) > 0.1),
       angle=st.floats(0.0, 0.05).filter(lambda a: abs(a - 0.01) > 1e-9),
       shift=st.floats(0.0, 0.003).filter(lambda s: abs(s - 1e-3) > 1e-12))
def test_a_handle_is_moved_only_past_a_millimetre_or_a_hundredth_of_a_radian(axis, angle, shift):
    shown = np.eye(4)
    actual = np.eye(4)
    actual[:3, :3] = transforms3d.axangles.axangle2mat(axis, angle)
    actual[0, 3] = shift
    assert moved(shown, actual) == (shift > 1e-3 or angle > 0.01)


def test_the_axis_controls_move_and_turn_along_the_three_axes():
    marker = target_marker('base', matrix_to_pose(np.eye(4)), 'free', menu_entries('auto', True))
    axes = {}
    for control in marker.controls:
        o = control.orientation
        assert math.isclose(o.x ** 2 + o.y ** 2 + o.z ** 2 + o.w ** 2, 1.0, rel_tol=1e-12)
        if control.interaction_mode in (Control.MOVE_AXIS, Control.ROTATE_AXIS):
            # RViz moves along / turns about the control orientation's x axis.
            x = transforms3d.quaternions.quat2mat([o.w, o.x, o.y, o.z])[:, 0]
            axes[control.name] = np.round(np.abs(x), 12)
    unit = {'x': [1, 0, 0], 'y': [0, 1, 0], 'z': [0, 0, 1]}
    for name, along in axes.items():
        assert np.array_equal(along, unit[name[-1]]), (name, along)
    assert sorted(axes) == ['move_x', 'move_y', 'move_z', 'rotate_x', 'rotate_y', 'rotate_z']
    assert marker.header.frame_id == 'base' and marker.header.stamp.sec == 0
    pole = pole_marker('base', np.array([0.1, 0.2, 0.3]))
    assert not any(c.interaction_mode == Control.ROTATE_AXIS for c in pole.controls)
    assert (pole.pose.position.x, pole.pose.position.y, pole.pose.position.z) == (0.1, 0.2, 0.3)


@pytest.mark.parametrize('solver', ['auto', 'analytic', 'jacobian'])
@pytest.mark.parametrize('smoothing', [True, False])
def test_the_menu_checks_the_current_solver_and_smoothing(solver, smoothing):
    entries = menu_entries(solver, smoothing)
    ids = [e.id for e in entries]
    assert len(set(ids)) == len(ids) and min(ids) > 0
    assert all(e.parent_id in [0] + ids for e in entries)
    checked = [e.title[4:] for e in entries if e.title.startswith('[x] ')]
    assert checked == [solver] + (['Smoothing'] if smoothing else [])
