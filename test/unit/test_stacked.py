# SPDX-License-Identifier: Apache-2.0

"""Several end effectors in one solve (issue 52): two arms on a shared torso, written by others.

The PR2 and TIAGo dual of test/urdf_corpus/external (unmodified): two 7-DoF
arms on a prismatic torso; the Unitree G1 humanoid: two 7-DoF arms on a
waist of three joints. What must hold, judged by the raw descriptions'
own forward kinematics (oracle.RawModel), never the solver's tables:

* random reachable pairs of targets are reached together, within every
  limit, with one value of the shared torso for both arms;
* a locked torso does not move; a light one moves less;
* each end effector's task is its own (a pose for one hand, a position
  for the other), and a pair that cannot be met together says by how much,
  within the limits;
* bad input is refused with the reason.
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node import InvalidInputError
from ik_node.core.errors import ModelError
from ik_node.core.ik.stacked import EndEffector, JointUnion, StackedIK
from ik_node.core.ik.task import Task
from ik_node.description.urdf import chain_from_urdf_string
from models import URDF_CORPUS
import numpy as np
from oracle import RawModel
import pytest

ROBOTS = {'pr2': ('base_footprint', 'l_gripper_tool_frame', 'r_gripper_tool_frame'),
          'tiago_dual': ('base_footprint', 'hand_left_tool_link', 'hand_right_tool_link'),
          'g1_29dof_rev_1_0': ('pelvis', 'left_rubber_hand', 'right_rubber_hand')}
# The joints of both arms' chains.
TORSOS = {'pr2': ['torso_lift_joint'], 'tiago_dual': ['torso_lift_joint'],
          'g1_29dof_rev_1_0': ['waist_yaw_joint', 'waist_roll_joint', 'waist_pitch_joint']}
XML = {name: (URDF_CORPUS / 'external' / f'{name}.urdf').read_text() for name in ROBOTS}
RAW = {name: RawModel(xml) for name, xml in XML.items()}
CHAINS = {name: [chain_from_urdf_string(XML[name], base, tip) for tip in tips]
          for name, (base, *tips) in ROBOTS.items()}
BACKENDS = ['numba', 'numpy']
# Met: by the oracle's FK (m, rad).
MET_M, MET_RAD = 1e-5, 1e-5


def solver(name, backend='numba', **options):
    """Both hands of a robot; a budget that a loaded machine does not cut short."""
    left, right = CHAINS[name]
    return StackedIK([EndEffector('left', left), EndEffector('right', right)],
                     backend=backend, **dict({'timeout_s': 1.0}, **options))


def oracle_tips(name, union, q):
    """Return the two tip poses (4, 4) at union joints q by the raw description."""
    base, *tips = ROBOTS[name]
    values = dict(zip(union.names, q))
    return [RAW[name].pose(base, tip, values) for tip in tips]


def rotation_angle(a, b):
    r = a[:3, :3].T @ b[:3, :3]
    sin = 0.5 * np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    return float(np.arctan2(sin, 0.5 * (np.trace(r) - 1.0)))


def random_union_q(union, rng, pad=0.1):
    lo = np.where(np.isfinite(union.lower), union.lower, -np.pi)
    hi = np.where(np.isfinite(union.upper), union.upper, np.pi)
    return rng.uniform(lo + pad * (hi - lo), hi - pad * (hi - lo))


def test_the_torso_is_one_joint_of_both_arms():
    for name in ROBOTS:
        union = JointUnion(CHAINS[name])
        assert union.shared() == TORSOS[name]
        assert union.n == 14 + len(TORSOS[name])
        for chain, cols in zip(CHAINS[name], union.columns):
            assert [union.names[c] for c in cols] == chain.joint_names


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('name', sorted(ROBOTS))
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_reachable_pairs_are_reached_together_within_every_limit(name, backend, seed):
    stack = solver(name, backend)
    union = stack.union
    rng = np.random.default_rng(seed)
    targets = oracle_tips(name, union, random_union_q(union, rng))
    result = stack.solve(targets, union.mid_limits())
    assert result.success, result.reason
    assert np.all(result.q >= union.lower) and np.all(result.q <= union.upper)
    for target, reached in zip(targets, oracle_tips(name, union, result.q)):
        assert np.linalg.norm(reached[:3, 3] - target[:3, 3]) <= MET_M
        assert rotation_angle(reached, target) <= MET_RAD


@pytest.mark.parametrize('name', sorted(ROBOTS))
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_locked_torso_stays_and_a_light_one_moves_less(name, seed):
    """Targets the arms reach with the torso where it is: locked, it stays exactly."""
    rng = np.random.default_rng(seed)
    union = JointUnion(CHAINS[name])
    t = [union.names.index(j) for j in TORSOS[name]]
    seed_q = random_union_q(union, rng)
    goal_q = random_union_q(union, rng)
    goal_q[t] = seed_q[t]
    targets = oracle_tips(name, union, goal_q)
    locked = solver(name, locked=TORSOS[name]).solve(targets, seed_q)
    np.testing.assert_array_equal(locked.q[t], seed_q[t])
    if locked.success:
        for target, reached in zip(targets, oracle_tips(name, union, locked.q)):
            assert np.linalg.norm(reached[:3, 3] - target[:3, 3]) <= MET_M


@pytest.mark.parametrize('name', sorted(ROBOTS))
def test_a_torso_weighed_down_moves_less_over_many_pairs(name):
    """Mean torso travel over 40 pairs the arms reach alone: weight 0.01 against 1."""
    rng = np.random.default_rng(3)
    heavy = solver(name)
    light = solver(name, joint_weights=dict.fromkeys(TORSOS[name], 0.01))
    union = heavy.union
    t = [union.names.index(j) for j in TORSOS[name]]
    travel = {'heavy': [], 'light': []}
    for _ in range(40):
        seed_q = random_union_q(union, rng)
        goal_q = np.clip(seed_q + rng.uniform(-0.3, 0.3, union.n), union.lower, union.upper)
        goal_q[t] = seed_q[t]   # reachable with the torso where it is
        targets = oracle_tips(name, union, goal_q)
        for label, stack in (('heavy', heavy), ('light', light)):
            result = stack.solve(targets, seed_q)
            assert result.success, result.reason
            travel[label].append(float(np.max(np.abs(result.q[t] - seed_q[t]))))
    assert np.mean(travel['light']) < 0.7 * np.mean(travel['heavy']), \
        (np.mean(travel['light']), np.mean(travel['heavy']))


@pytest.mark.parametrize('backend', BACKENDS)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_each_hand_has_its_own_task(backend, seed):
    """PR2: the left hand a full pose, the right a position (its orientation left free)."""
    left, right = CHAINS['pr2']
    hands = [EndEffector('left', left), EndEffector('right', right, Task('position'))]
    stack = StackedIK(hands, backend=backend, timeout_s=1.0)
    union = stack.union
    rng = np.random.default_rng(seed)
    targets = oracle_tips('pr2', union, random_union_q(union, rng))
    turned = targets[1].copy()
    turned[:3, :3] = turned[:3, :3] @ np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0],
                                                [0.0, 0.0, 1.0]])   # not asked for
    result = stack.solve([targets[0], turned], union.mid_limits())
    assert result.success, result.reason
    reached = oracle_tips('pr2', union, result.q)
    assert np.linalg.norm(reached[0][:3, 3] - targets[0][:3, 3]) <= MET_M
    assert rotation_angle(reached[0], targets[0]) <= MET_RAD
    assert np.linalg.norm(reached[1][:3, 3] - turned[:3, 3]) <= MET_M
    assert result.errors[1][1] == 0.0


def test_hands_asked_to_be_three_metres_apart_say_how_far_each_is():
    stack = solver('pr2', max_restarts=5)
    union = stack.union
    tips = oracle_tips('pr2', union, union.mid_limits())
    apart = [t.copy() for t in tips]
    apart[0][1, 3] += 1.5
    apart[1][1, 3] -= 1.5
    result = stack.solve(apart, union.mid_limits())
    assert not result.success
    assert 'left' in result.reason and 'right' in result.reason and 'mm' in result.reason
    assert np.all(np.isfinite(result.q))
    assert np.all(result.q >= union.lower) and np.all(result.q <= union.upper)
    reached = oracle_tips('pr2', union, result.q)
    for target, tip, (pos, _) in zip(apart, reached, result.errors):
        assert pos == pytest.approx(np.linalg.norm(tip[:3, 3] - target[:3, 3]), abs=1e-9)
        assert pos > 0.5


def test_bad_end_effectors_and_options_are_refused_with_the_reason():
    left, right = CHAINS['pr2']
    with pytest.raises(ModelError, match='same tip link'):
        StackedIK([EndEffector('a', left), EndEffector('b', left)])
    arm = chain_from_urdf_string(XML['pr2'], 'torso_lift_link', 'r_gripper_tool_frame')
    with pytest.raises(ModelError, match='same base link'):
        StackedIK([EndEffector('a', left), EndEffector('b', arm)])
    with pytest.raises(InvalidInputError, match='names must differ'):
        StackedIK([EndEffector('a', left), EndEffector('a', right)])
    for weight in (0.0, -1.0, float('nan'), 2.0):
        with pytest.raises(InvalidInputError, match='joint_weights'):
            StackedIK([EndEffector('a', left), EndEffector('b', right)],
                      joint_weights={'torso_lift_joint': weight})
    with pytest.raises(InvalidInputError, match='joint_weights: not joints'):
        StackedIK([EndEffector('a', left)], joint_weights={'r_shoulder_pan_joint': 0.5})
    with pytest.raises(InvalidInputError, match='locked: not joints'):
        StackedIK([EndEffector('a', left)], locked=['head_pan_joint'])
    stack = solver('pr2')
    with pytest.raises(InvalidInputError, match='expected 2 poses'):
        stack.solve([np.eye(4)], stack.union.mid_limits())
    bad = np.eye(4)
    bad[0, 3] = np.nan
    with pytest.raises(InvalidInputError, match='target of right'):
        stack.solve([np.eye(4), bad], stack.union.mid_limits())
