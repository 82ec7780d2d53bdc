# SPDX-License-Identifier: Apache-2.0

"""Log-quaternion Jacobian IK: round trips, limits, continuity, failures, derivatives."""

from pathlib import Path

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node import Chain, IKError, InvalidInputError, JacobianIK
from ik_node.core import rotations as rot
from ik_node.core.kernels import base as kernels
from ik_node.core.poses import pose_residual, split_pose
from models import MIXED_URDF, random_q, reference_forward
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARMS = {
    'iiwa14': (ROOT / 'urdf' / 'iiwa14.urdf', 'iiwa_link_0', 'tool0'),
    'ur5e': (ROOT / 'urdf' / 'ur5e.urdf', 'base_link', 'tool0'),
}
# Generous wall-clock budget: these tests check what is found, not how fast.
SLOW_OK = {'timeout_s': 2.0}
# Every behaviour holds for the numpy reference and for the compiled twin.
BACKENDS = pytest.mark.parametrize('backend', ['numpy', 'numba'])


def load(name):
    """Return (chain, urdf text, base, tip) of a bundled arm."""
    path, base, tip = ARMS[name]
    return Chain.from_urdf_file(str(path), base, tip), path.read_text(), base, tip


def independent_errors(xml, base, tip, chain, q, target):
    """Position and angle errors of q's tip against target, by the independent FK."""
    t = reference_forward(xml, base, tip, dict(zip(chain.joint_names, q)))
    pos = np.linalg.norm(t[:3, 3] - target[:3, 3])
    cos = np.clip((np.trace(t[:3, :3].T @ target[:3, :3]) - 1.0) / 2.0, -1.0, 1.0)
    return pos, np.arccos(cos)


@BACKENDS
@pytest.mark.parametrize('name', sorted(ARMS))
@settings(max_examples=60)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), random_seed_mode=st.booleans())
def test_fk_ik_fk_round_trip(backend, name, seed, random_seed_mode):
    chain, xml, base, tip = load(name)
    rng = np.random.default_rng(seed)
    target = chain.forward(random_q(chain, rng))
    start = random_q(chain, rng) if random_seed_mode else chain.mid_limits()
    res = JacobianIK(chain, backend=backend, **SLOW_OK).solve(target, start)
    assert res.success, res.reason
    assert chain.within_limits(res.q)
    pos, ang = independent_errors(xml, base, tip, chain, res.q, target)
    assert pos < 1e-6 and ang < 2e-6
    assert res.position_error == pytest.approx(pos, abs=1e-9)
    assert res.reason == ''


@BACKENDS
def test_mixed_chain_with_prismatic_continuous_and_mimic_joints(backend):
    chain = Chain.from_urdf_string(MIXED_URDF, 'base', 'tip')
    solver = JacobianIK(chain, backend=backend, **SLOW_OK)
    rng = np.random.default_rng(5)
    for _ in range(20):
        q = random_q(chain, rng)
        values = dict(zip(chain.joint_names, q))
        values['follow'] = -0.5 * values['bend'] + 0.1
        target = reference_forward(MIXED_URDF, 'base', 'tip', values)
        # 4 free joints cannot reach an arbitrary 6-D pose, but this one is
        # reachable by construction.
        res = solver.solve(target, chain.mid_limits())
        assert res.success, res.reason
        assert chain.within_limits(res.q)


@BACKENDS
@settings(max_examples=60)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_targets_reachable_only_at_a_joint_limit(backend, seed):
    chain = load('iiwa14')[0]
    rng = np.random.default_rng(seed)
    q = random_q(chain, rng)
    pinned = rng.choice(chain.n, size=2, replace=False)
    q[pinned] = np.where(rng.random(2) < 0.5, chain.lower[pinned], chain.upper[pinned])
    res = JacobianIK(chain, backend=backend, **SLOW_OK).solve(chain.forward(q), chain.mid_limits())
    assert chain.within_limits(res.q)  # exactly: no tolerance
    assert res.success, res.reason


@BACKENDS
def test_unreachable_target_returns_the_closest_pose_within_limits(backend):
    chain = load('iiwa14')[0]
    reach = 0.42 + 0.40 + 0.126
    shoulder = np.array([0.0, 0.0, 0.36])
    direction = np.array([0.6, 0.0, 0.8])
    target = np.eye(4)
    target[:3, 3] = shoulder + 2.0 * direction
    solver = JacobianIK(chain, goal='position', timeout_s=0.05, max_restarts=5,
                        backend=backend)
    res = solver.solve(target, chain.mid_limits())
    assert not res.success
    assert 'closest pose' in res.reason
    assert np.all(np.isfinite(res.q)) and chain.within_limits(res.q)
    reached = chain.forward(res.q)[:3, 3]
    # The closest reachable point lies on the sphere of radius `reach` around
    # the shoulder, along the direction of the target. Judged by what the
    # user gets, the distance left to the target (at most 1 mm more than the
    # least possible), not by the point: at full stretch the error's gradient
    # vanishes sideways, and where the descent stops along the sphere (here
    # 1.7 mm aside, 0.3 mm farther) depends on the library's rounding.
    left = float(np.linalg.norm(target[:3, 3] - reached))
    assert 2.0 - reach - 1e-6 <= left <= 2.0 - reach + 1e-3
    assert res.position_error == pytest.approx(left, abs=1e-9)
    aim = (reached - shoulder) / np.linalg.norm(reached - shoulder)
    assert np.degrees(np.arccos(min(1.0, float(aim @ direction)))) < 0.5


@BACKENDS
@settings(max_examples=20)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_moving_target_gives_continuous_joint_motion(backend, seed):
    chain = load('iiwa14')[0]
    rng = np.random.default_rng(seed)
    q = 0.5 * random_q(chain, rng)
    # Start away from the iiwa's singular joints (2: shoulder, 4: elbow
    # stretched, 6: wrist) so the 2 cm path stays regular and within reach;
    # near a singularity continuity needs fast joints by nature.
    sign = np.where(rng.random(3) < 0.5, -1.0, 1.0)
    q[[1, 3, 5]] = sign * rng.uniform(0.6, 1.5, size=3)
    start = chain.forward(q)
    solver = JacobianIK(chain, backend=backend, **SLOW_OK)
    previous = q
    axis = rng.normal(size=3)
    for k in range(1, 41):  # 0.5 mm and 0.005 rad per call
        target = start.copy()
        target[:3, 3] += 5e-4 * k * np.array([1.0, -0.5, 0.3]) / np.linalg.norm([1, -0.5, 0.3])
        target[:3, :3] = rot.quaternion_to_matrix(
            rot.axis_angle_to_quaternion(axis, 0.005 * k)) @ start[:3, :3]
        res = solver.solve(target, previous)
        assert res.success, res.reason
        assert res.restarts == 0
        assert np.max(np.abs(res.q - previous)) < 0.05
        previous = res.q


@pytest.mark.parametrize('angle', [0.0, 1e-5, 0.5, 2.0, np.pi - 1e-3])
def test_log_error_jacobian_matches_finite_differences(angle):
    # The task matrix A must satisfy d residual / d q = -A, exactly, also for
    # large orientation errors (where the small-angle model is off).
    chain = load('iiwa14')[0]
    solver = JacobianIK(chain)
    rng = np.random.default_rng(1)
    q = random_q(chain, rng)
    tip = chain.forward(q)
    target = tip.copy()
    target[:3, :3] = rot.quaternion_to_matrix(
        rot.axis_angle_to_quaternion([0.3, -0.4, 0.5], angle)) @ tip[:3, :3]
    target[:3, 3] += [0.1, -0.2, 0.05]
    r = pose_residual(target, tip)
    a, _ = solver._kernels.lm.task_rows(chain.jacobian(q), r, 0, (0.0, 0.0, 1.0),
                                        split_pose(tip)[0], split_pose(tip)[1],
                                        split_pose(target)[1], solver._w6)
    h = 1e-6
    numeric = np.stack([(pose_residual(target, chain.forward(q + h * e))
                         - pose_residual(target, chain.forward(q - h * e))) / (2 * h)
                        for e in np.eye(chain.n)], axis=1)
    np.testing.assert_allclose(-a, numeric, atol=1e-7)
    if angle > 1.0:  # the exact model differs from the small-angle one here
        assert np.max(np.abs(a[3:] - chain.jacobian(q)[3:])) > 0.1


@given(st.floats(min_value=0.0, max_value=np.pi - 1e-6), st.integers(0, 2**32 - 1))
def test_inverse_right_jacobian_identity(angle, seed):
    # Log(Exp(phi) Exp(d)) = phi + Jr^-1(phi) d + O(d^2).
    axis = np.random.default_rng(seed).normal(size=3)
    axis /= np.linalg.norm(axis)
    phi = angle * axis
    d = 1e-7 * np.random.default_rng(seed + 1).normal(size=3)
    q = rot.multiply(rot.exp(phi / 2), rot.exp(d / 2))
    q = q if q[3] >= 0 else -q
    moved = 2.0 * rot.log(q)
    inverse = np.array(kernels.inverse_right_jacobian(phi)).reshape(3, 3)
    np.testing.assert_allclose(moved - phi, inverse @ d,
                               atol=1e-12 + 1e-5 * np.linalg.norm(d))


@BACKENDS
def test_position_only_and_orientation_only_goals(backend):
    chain = load('iiwa14')[0]
    rng = np.random.default_rng(8)
    target = chain.forward(random_q(chain, rng))
    start = chain.mid_limits()
    pos_only = JacobianIK(chain, goal='position', backend=backend, **SLOW_OK).solve(target, start)
    assert pos_only.success and pos_only.orientation_error == 0.0
    assert np.linalg.norm(chain.forward(pos_only.q)[:3, 3] - target[:3, 3]) < 1e-6
    ori_only = JacobianIK(chain, goal='orientation', backend=backend, **SLOW_OK).solve(target,
                                                                                       start)
    assert ori_only.success and ori_only.position_error == 0.0
    reached = chain.forward(ori_only.q)[:3, :3]
    assert np.linalg.norm(2 * rot.log(rot.matrix_to_quaternion(reached.T @ target[:3, :3]))) \
        < 1e-6


@BACKENDS
def test_restarts_are_reproducible_and_bounded(backend):
    chain = load('ur5e')[0]
    solver = JacobianIK(chain, timeout_s=1.0, max_restarts=3, random_seed=4,
                        backend=backend)
    target = np.eye(4)
    # Out of reach (the UR5e reaches under 1.0 m from its shoulder), but inside
    # the ball of Chain.reach_sphere (1.15 m): every restart is used.
    target[:3, 3] = [1.1, 0.0, 0.1625]
    first = solver.solve(target, chain.mid_limits())
    second = solver.solve(target, chain.mid_limits())
    assert first.restarts == 3 and not first.success
    np.testing.assert_array_equal(first.q, second.q)


@BACKENDS
@pytest.mark.parametrize('name', ['ur5e', 'iiwa14'])
def test_a_target_beyond_the_reach_sphere_gets_no_restarts_and_says_why(backend, name):
    # Restarts cannot succeed there: 200 of them took ~30 ms, at every tick of
    # a trajectory through such poses (issue 30's slowest test).
    chain = load(name)[0]
    centre, radius = chain.reach_sphere()
    target = np.eye(4)
    target[:3, 3] = centre + (radius + 0.01) * np.array([0.6, 0.0, 0.8])
    res = JacobianIK(chain, timeout_s=1.0, backend=backend).solve(target, chain.mid_limits())
    assert not res.success and res.restarts == 0
    assert 'target out of reach' in res.reason and 'closest pose' in res.reason
    assert chain.within_limits(res.q)
    # Still the attempt from the seed: closer to the target than the seed is.
    seed_gap = np.linalg.norm(chain.forward(chain.mid_limits())[:3, 3] - target[:3, 3])
    assert res.position_error < seed_gap


def test_default_budget_follows_the_backend_and_an_explicit_one_wins():
    # The numpy reference needs a larger budget for the same success rate
    # (README, "Without numba"); an explicit timeout_s is always kept.
    chain = load('ur5e')[0]
    numpy_default = JacobianIK(chain, backend='numpy').timeout_s
    numba_default = JacobianIK(chain, backend='numba').timeout_s
    assert numpy_default >= 5 * numba_default > 0
    assert JacobianIK(chain, backend='numpy', timeout_s=0.02).timeout_s == 0.02
    # 'auto' takes the default of the backend it ends up with.
    auto = JacobianIK(chain)
    assert auto.timeout_s == {'numpy': numpy_default, 'numba': numba_default}[auto.backend]


@BACKENDS
def test_continuous_joints_stay_near_the_seed(backend):
    chain = Chain.from_urdf_string(MIXED_URDF, 'base', 'tip')
    q = np.array([0.1, 0.4, 0.3, 0.2])
    values = dict(zip(chain.joint_names, q))
    values['follow'] = -0.5 * values['bend'] + 0.1
    target = reference_forward(MIXED_URDF, 'base', 'tip', values)
    seed = q + np.array([0.0, 6 * np.pi, 0.0, 0.0])  # spin three turns away
    res = JacobianIK(chain, backend=backend, **SLOW_OK).solve(target, seed)
    assert res.success
    assert abs(res.q[1] - seed[1]) < np.pi


@pytest.mark.parametrize('bad, pattern', [
    (np.full((4, 4), np.nan), 'finite'),
    (np.diag([2.0, 1.0, 1.0, 1.0]), 'orthonormal'),
    (np.eye(3), r'\(4, 4\)'),
    (np.vstack((np.eye(4)[:3], [0, 0, 1, 1])), 'last row'),
])
def test_invalid_targets_are_rejected(bad, pattern):
    chain = load('ur5e')[0]
    with pytest.raises(IKError, match=pattern):
        JacobianIK(chain).solve(bad, chain.mid_limits())


def test_invalid_options_and_seeds_are_rejected():
    chain = load('ur5e')[0]
    with pytest.raises(InvalidInputError, match='pose, position, orientation'):
        JacobianIK(chain, goal='elbow')
    with pytest.raises(InvalidInputError, match='timeout_s'):
        JacobianIK(chain, timeout_s=0.0)
    with pytest.raises(InvalidInputError, match='max_restarts'):
        JacobianIK(chain, max_restarts=-1)
    with pytest.raises(InvalidInputError, match='nullspace_gain'):
        JacobianIK(chain, nullspace_gain=2.0)
    with pytest.raises(InvalidInputError, match=r'expected shape \(6,\)'):
        JacobianIK(chain).solve(np.eye(4), np.zeros(5))


@BACKENDS
def test_seed_outside_limits_is_clipped_and_answer_stays_within(backend):
    chain = load('iiwa14')[0]
    q = random_q(chain, np.random.default_rng(2))
    res = JacobianIK(chain, backend=backend, **SLOW_OK).solve(chain.forward(q), chain.upper + 1.0)
    assert res.success and chain.within_limits(res.q)
