# SPDX-License-Identifier: Apache-2.0

"""The damped least-squares steps that follow a moving pose (ik_node.core.ik.local)."""

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.core.ik import local as local_ik
from ik_node.core.poses import pose_residual_of_matrices
from ik_reference import reference_follow
import numpy as np
from oracle import forward, pose_errors
import pytest
from tracking import CHAINS
import transforms3d

ARMS = sorted(CHAINS)


def backend_of(twin):
    """Return the Backend whose follow kernel runs: CPython's, or numba's (skip without it)."""
    from ik_node.core.kernels.backend import resolve
    if twin == 'compiled':
        pytest.importorskip('numba', reason='numba is not installed: nothing compiled')
        return resolve('numba')
    return resolve('numpy')


TWINS = ['numpy', 'compiled']


@settings(max_examples=200)
@given(seed=st.integers(0, 2**32 - 1), smallest=st.floats(0.0, 0.2))
def test_the_step_is_the_pseudo_inverse_away_from_singularities_and_damped_near_them(
        seed, smallest):
    rng = np.random.default_rng(seed)
    # A 6 x 7 Jacobian with a chosen smallest singular value.
    u, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    v, _ = np.linalg.qr(rng.normal(size=(7, 7)))
    s = np.sort(np.concatenate(([smallest], rng.uniform(0.3, 2.0, 5))))[::-1]
    jac = u @ np.diag(s) @ v[:6]
    e = rng.normal(size=6)
    dq = local_ik.damped_step(jac, e)
    floor, most = local_ik.SIGMA_FLOOR, local_ik.MAX_DAMPING
    if smallest >= floor:
        np.testing.assert_allclose(dq, np.linalg.pinv(jac) @ e, rtol=1e-9, atol=1e-9)
    else:   # J^T (J J^T + l^2 I)^-1 e
        damping2 = (1.0 - (smallest / floor) ** 2) * most ** 2
        expected = jac.T @ np.linalg.solve(jac @ jac.T + damping2 * np.eye(6), e)
        np.testing.assert_allclose(dq, expected, rtol=1e-9, atol=1e-9)
        # Bounded: no more than |e| / (2 l) along the weakest direction.
        assert abs(v[5] @ dq) <= np.linalg.norm(e) / (2.0 * np.sqrt(damping2)) + 1e-9


@pytest.mark.parametrize('twin', TWINS)
@pytest.mark.parametrize('name', ARMS)
@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.floats(1e-4, 0.05))
def test_a_nearby_pose_is_reached_in_a_few_steps(name, seed, spread, twin):
    kernels = backend_of(twin)
    chain, _, q0 = CHAINS[name]
    rng = np.random.default_rng(seed)
    reference = np.clip(q0 + rng.uniform(-0.5, 0.5, chain.n), chain.lower, chain.upper)
    target = forward(chain, np.clip(reference + rng.uniform(-spread, spread, chain.n),
                                    chain.lower, chain.upper))
    q, left, converged = local_ik.follow(chain, reference, target, kernels=kernels)
    assert converged and left == 0.0
    pos, rot = pose_errors(chain, q, target)
    assert pos <= 1e-6 and rot <= 1e-6


@pytest.mark.parametrize('twin', TWINS)
@pytest.mark.parametrize('name', ARMS)
@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), far=st.floats(0.0, 3.0))
def test_the_result_is_never_farther_from_the_pose_and_stays_within_the_limits(
        name, seed, far, twin):
    kernels = backend_of(twin)
    chain, _, _ = CHAINS[name]
    rng = np.random.default_rng(seed)
    reference = rng.uniform(chain.lower, chain.upper)
    target = forward(chain, rng.uniform(chain.lower, chain.upper))
    target[:3, 3] *= 1.0 + far       # often out of reach
    q, left, _ = local_ik.follow(chain, reference, target, kernels=kernels)
    assert chain.within_limits(q) and np.all(np.isfinite(q))
    before = pose_errors(chain, reference, target)
    after = pose_errors(chain, q, target)
    assert after[0] ** 2 + after[1] ** 2 <= before[0] ** 2 + before[1] ** 2 + 1e-12
    assert 0.0 <= left <= 1.0


@pytest.mark.parametrize('twin', TWINS)
@pytest.mark.parametrize('name', ARMS)
@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.floats(0.0, 1.5), near_zero=st.booleans())
def test_the_kernel_steps_are_the_reference_steps(name, seed, spread, near_zero, twin):
    """kernels.follow, interpreted and compiled, against the numpy reference (ik_reference).

    The same joints (1e-9), the same verdict; near the all-zero pose
    (singular at shoulder, elbow and wrist) too, and with targets beyond a
    step's reach (the halving and the stop).
    """
    kernels = backend_of(twin)
    chain, _, q0 = CHAINS[name]
    rng = np.random.default_rng(seed)
    start = np.zeros(chain.n) + rng.uniform(-1e-3, 1e-3, chain.n) if near_zero else \
        rng.uniform(chain.lower, chain.upper)
    reference = np.clip(start, chain.lower, chain.upper)
    target = forward(chain, np.clip(reference + rng.uniform(-spread, spread, chain.n),
                                    chain.lower, chain.upper))
    for iterations in (1, 3):
        ours = local_ik.follow(chain, reference, target, iterations, kernels=kernels)
        q, first, errors, converged = reference_follow(
            chain, reference, target, iterations, local_ik.TOLERANCE, local_ik.SIGMA_FLOOR,
            local_ik.MAX_DAMPING, local_ik.BACKTRACKS)
        before = first[0] ** 2 + first[1] ** 2
        left = 0.0 if converged or before == 0.0 else (errors[0] ** 2 + errors[1] ** 2) / before
        np.testing.assert_allclose(ours[0], q, atol=1e-9)
        assert ours[2] == converged and abs(ours[1] - left) < 1e-6


def test_near_the_all_zero_pose_of_the_ur5e_a_step_the_arm_cannot_take_stays_bounded():
    chain, _, _ = CHAINS['ur5e']
    near = np.full(chain.n, 1e-3)               # 1 mrad from the all-zero pose
    pose, jac = chain.forward_and_jacobian(near)
    u, s, _ = np.linalg.svd(jac)
    assert s[-1] < 1e-5                          # singular there
    # A target 1 mm / 1 mrad along the direction the arm cannot move.
    weak = 1e-3 * u[:, -1]
    target = pose.copy()
    target[:3, 3] += weak[:3]
    target[:3, :3] = transforms3d.axangles.axangle2mat(weak[3:], np.linalg.norm(weak[3:])) \
        @ pose[:3, :3]
    undamped = np.linalg.lstsq(jac, pose_residual_of_matrices(target, pose), rcond=None)[0]
    assert np.max(np.abs(undamped)) > 10.0      # the plain pseudo-inverse: tens of radians
    q, _, _ = local_ik.follow(chain, near, target, iterations=1)
    assert np.max(np.abs(q - near)) < 0.01


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_an_overshooting_step_is_halved_until_it_descends(name):
    """Three times the joint offset overshoots (error ~2x); half of it (1.5x) descends (~0.5x)."""
    chain, _, q0 = CHAINS[name]
    rng = np.random.default_rng(7)
    q = np.asarray(q0, dtype=float) + rng.uniform(-0.3, 0.3, chain.n)
    d = rng.normal(size=chain.n)
    d *= 1e-4 / np.linalg.norm(d)            # small: the linear regime
    target = forward(chain, q + d)
    pos, ang = pose_errors(chain, q, target)
    taken = local_ik._descend(chain, target, q, 3.0 * d, (pos, ang))
    assert taken is not None
    np.testing.assert_allclose(taken[0], q + 1.5 * d, atol=1e-15)
    new_pos, new_ang = pose_errors(chain, taken[0], target)
    assert new_pos ** 2 + new_ang ** 2 < pos ** 2 + ang ** 2
    # A step away from the target never descends, however short.
    assert local_ik._descend(chain, target, q, -d, (pos, ang)) is None
