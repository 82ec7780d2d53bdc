# SPDX-License-Identifier: Apache-2.0
"""Joint-space plans (issue 50): free paths, and twins of the goal a whole turn away.

What must hold: a goal's twins (the same joints but whole turns on the joints
that span more than one) are the same pose by the oracle's forward
kinematics and lie within the limits, nearest the start first; a plan's
every point keeps the margin (the geometry oracle, not the model under
test); where the goal itself is walled off and a twin is not, the path
reaches the twin; where the goal is free, the path ends at the goal; a
goal beside an obstacle (within the clearance, outside the margin) is
planned to; a plan that runs out of time is asked again with more time, up
to route.MAX_PLANS, and the verdict says 'no path' only after the last.
Both planners (OMPL's when it imports, and the package's own).
"""

import math

from geometry_oracle import distance_interval, RobotSolids
from hypothesis import given, settings
from hypothesis import strategies as st
from models import ARMS
import numpy as np
from oracle import RawModel
import pytest
from strategies import examples

coal = pytest.importorskip('coal', reason='coal is not installed: collision is off without it')

from ik_node.core.collision.guard import CollisionGuard  # noqa: E402,I100
from ik_node.core.collision.planner import CLEARANCE_M, JointPlanner, MAX_GOALS, \
    NO_PATH_IN_TIME, ompl_available, turn_variants  # noqa: E402
from ik_node.core.collision.shapes import checked_shape  # noqa: E402
from ik_node.core.ik.base import IKResult  # noqa: E402
from ik_node.core.model.chain import Chain  # noqa: E402
from ik_node.core.motion.arrival import Verdict  # noqa: E402
from ik_node.core.motion.route import MAX_PLANS, Recovery, Rest  # noqa: E402
from ik_node.core.motion.worker import Answer  # noqa: E402
from ik_node.description.geometry import collision_model  # noqa: E402

MARGIN = 0.01
LIBRARIES = ['own'] + (['ompl'] if ompl_available() else [])

# One revolute joint about z turning a 40 cm bar, limits +-2 pi: every pose
# has two or three angles a turn apart.
TURNTABLE = """<robot name="turntable">
  <link name="base"/>
  <link name="bar">
    <collision><origin xyz="0.3 0 0"/><geometry><box size="0.4 0.04 0.04"/></geometry></collision>
  </link>
  <joint name="turn" type="revolute">
    <parent link="base"/><child link="bar"/><axis xyz="0 0 1"/>
    <limit lower="-6.283185307179586" upper="6.283185307179586" effort="1" velocity="1"/>
  </joint>
</robot>"""


def turntable(*posts_at):
    """Return (chain, model, xml) of the turntable; a 5 cm post at each angle of posts_at (rad)."""
    chain = Chain.from_urdf_string(TURNTABLE, 'base', 'bar')
    model, _ = collision_model(TURNTABLE, chain, home=np.zeros(1))
    world = {}
    for k, angle in enumerate(posts_at):
        pose = np.eye(4)
        pose[:3, 3] = [0.3 * math.cos(angle), 0.3 * math.sin(angle), 0.0]
        world[f'post{k}'] = (checked_shape('box', (0.05, 0.05, 0.05), pose, source='post'),)
    model.set_obstacles(world)
    return chain, model, TURNTABLE


def oracle_lowest(xml, chain, model, q):
    """Return the geometry oracle's lower bound of the bar-post distance at q (m)."""
    raw = RawModel(xml)
    solids = RobotSolids(xml, raw, chain.base_link, ['bar'])
    bar = solids.posed('bar', dict(zip(chain.joint_names, q)))[0]
    post = model.obstacles['post0'][0]
    lowest, _ = distance_interval(bar, (post.kind, post.size, post.pose), MARGIN)
    return lowest


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=6, max_size=6),
       st.lists(st.floats(-1.0, 1.0), min_size=6, max_size=6))
def test_the_twins_of_a_goal_are_its_pose_within_the_limits_nearest_first(u, w):
    path, base, tip = ARMS['ur5e']
    xml = path.read_text()
    chain = Chain.from_urdf_string(xml, base, tip)
    raw = RawModel(xml)
    mid, half = chain.mid_limits(), (chain.upper - chain.lower) / 2
    goal, start = mid + half * np.array(u), mid + half * np.array(w)
    twins = turn_variants(chain.turnable, goal, chain.lower, chain.upper, start)
    assert 1 <= len(twins) <= MAX_GOALS
    assert any(np.array_equal(t, goal) for t in twins)
    pose = raw.pose(base, tip, dict(zip(chain.joint_names, goal)))
    for t in twins:
        assert np.all(t >= chain.lower) and np.all(t <= chain.upper)
        turns = (t - goal) / (2 * math.pi)
        np.testing.assert_allclose(turns, np.round(turns), atol=1e-12)
        assert np.all(np.where(chain.turnable, True, t == goal))
        np.testing.assert_allclose(raw.pose(base, tip, dict(zip(chain.joint_names, t))), pose,
                                   atol=1e-9)
    gaps = [float(np.sum((t - start) ** 2)) for t in twins]
    assert gaps == sorted(gaps)
    # Complete: every twin within the limits (counted independently) when they fit.
    count = 1
    for j in range(chain.n):
        shifts = [k for k in range(-3, 4) if chain.lower[j] <= goal[j] + 2 * math.pi * k
                  <= chain.upper[j]] if chain.turnable[j] else [0]
        count *= len(shifts)
    assert len(twins) == min(count, MAX_GOALS)


@pytest.mark.parametrize('library', LIBRARIES)
def test_a_goal_walled_off_is_reached_at_its_twin_the_other_way_round(library):
    """The post stands between 0 and 1 rad: the pose at 1 rad is reached at 1 - 2 pi."""
    chain, model, xml = turntable(0.5)
    guard = CollisionGuard(model, MARGIN)
    start, goal = np.zeros(1), np.ones(1)
    path, note = JointPlanner(library, seed=3).plan(guard, start, goal, lambda: None)
    assert path is not None, note
    assert path[0] == start[0] and path[-1][0] == pytest.approx(1.0 - 2 * math.pi, abs=1e-12)
    assert np.all(np.diff(path[:, 0]) < 0.0)   # the other way round, never back
    for q in path[::4]:
        assert oracle_lowest(xml, chain, model, q) >= MARGIN, q


@pytest.mark.parametrize('library', LIBRARIES)
def test_a_free_goal_is_reached_itself_not_a_twin(library):
    chain, model, _ = turntable(math.pi)   # the post behind: nothing in the way
    guard = CollisionGuard(model, MARGIN)
    path, note = JointPlanner(library, seed=3).plan(guard, np.zeros(1), np.ones(1),
                                                    lambda: None)
    assert path is not None, note
    assert path[-1][0] == 1.0 and np.all(np.abs(path[:, 0] - 0.5) <= 0.5 + 1e-12)


@pytest.mark.parametrize('library', LIBRARIES)
def test_a_goal_inside_the_margin_has_no_path_and_says_so(library):
    chain, model, _ = turntable(0.5)
    guard = CollisionGuard(model, MARGIN)
    path, note = JointPlanner(library, seed=3).plan(guard, np.zeros(1), np.full(1, 0.5),
                                                    lambda: None)
    assert path is None and note == 'the goal is inside the collision margin'


@pytest.mark.parametrize('library', LIBRARIES)
def test_a_goal_beside_an_obstacle_within_the_clearance_is_planned_to(library):
    """The goal keeps the margin but not margin + CLEARANCE_M: a path ends at it."""
    chain, model, xml = turntable(0.5)
    guard = CollisionGuard(model, MARGIN)
    angles = np.linspace(0.0, 0.5, 2001)
    gaps = np.array([model.distances(np.array([a]), 1.0).lowest for a in angles])
    between = angles[(gaps > MARGIN + 0.2 * CLEARANCE_M) & (gaps < MARGIN + 0.8 * CLEARANCE_M)]
    goal = np.array([between[len(between) // 2]])
    start = np.array([-1.0])
    path, note = JointPlanner(library, seed=3).plan(guard, start, goal, lambda: None)
    assert path is not None, note
    assert path[-1][0] == goal[0]
    for q in path[::3]:
        assert oracle_lowest(xml, chain, model, q) >= MARGIN, q


def test_a_plan_out_of_time_says_how_long_it_had_and_has_more_when_asked_again():
    chain, model, _ = turntable(0.5, -0.5)   # 1 rad is walled off both ways round
    guard = CollisionGuard(model, MARGIN)
    planner = JointPlanner('own', time_limit_s=0.05, seed=3)
    for attempt, limit in ((0, 0.05), (2, 0.15)):
        path, note = planner.plan(guard, np.zeros(1), np.ones(1), lambda: None, attempt=attempt)
        assert path is None and note == f'{NO_PATH_IN_TIME} {limit:g} s (own RRT-Connect)'


def test_a_plan_out_of_time_is_asked_again_until_the_last_then_no_path():
    chain, _, _ = turntable()
    recovery = Recovery(chain)
    recovery.route = Rest(('k',), np.zeros(1), None)
    target = chain.forward(np.ones(1))
    result = IKResult(np.ones(1), True, 0.0, 0.0)

    def verdict():
        return recovery.arrival(np.zeros(1), np.zeros(1), target, 'target', result, None, 1.0)

    def failed(note):
        return Answer(('path', 'k'), result, np.ones(1), True, None, note)

    for plan in range(1, MAX_PLANS + 1):
        recovery.asked(0.0)
        assert recovery.plans == plan and verdict().verdict == Verdict.HELD
        assert 'planning a path' in verdict().reason
        assert recovery.take_path(failed(f'{NO_PATH_IN_TIME} 2 s (own RRT-Connect)'), 1.0) \
            is None
        assert recovery.retry() == (plan < MAX_PLANS)
        if plan < MAX_PLANS:
            assert verdict().verdict == Verdict.NO_PATH   # until asked again
    assert verdict().verdict == Verdict.NO_PATH and NO_PATH_IN_TIME in verdict().reason
    # A goal the planner refuses is final at once.
    recovery.forget()
    recovery.route = Rest(('k',), np.zeros(1), None)
    recovery.asked(0.0)
    recovery.take_path(failed('the goal is inside the collision margin'), 1.0)
    assert not recovery.retry() and verdict().verdict == Verdict.NO_PATH
