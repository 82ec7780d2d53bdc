# SPDX-License-Identifier: Apache-2.0

"""Ball-joint chains (seed 000): FK, Jacobians, the update, and the compiled twin."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node.bench import seed000
from ik_node.bench.seed000 import balljoint
from ik_node.bench.seed000 import jit
from ik_node.bench.seed000.balljoint import BallJointChain, minimum_norm_solution
from ik_node.core import rotations as rot
from ik_node.core.errors import InvalidInputError
import numpy as np
import pytest

KINDS = {'quaternion': jit.QUATERNION, 'euler': jit.EULER}


def random_chain(rng, parameterization, n=5):
    """Return a chain with random link vectors and random parameters (1, n, 3)."""
    chain = BallJointChain(rng.uniform(-1.0, 1.0, size=(n, 3)), parameterization)
    bound = 1.4 if parameterization == 'quaternion' else np.pi
    return chain, rng.uniform(-bound, bound, size=(1, n, 3))


def independent_forward(chain, params):
    """Compose joint by joint: p = R_0 (o_0 + R_1 (o_1 + ...)), via quaternions."""
    p = np.zeros(3)
    for i in range(chain.n - 1, -1, -1):
        u = params[0, i]
        if chain.parameterization == 'quaternion':
            q = rot.exp(u)
        else:
            q = rot.multiply(rot.axis_angle_to_quaternion([0, 0, 1], u[0]), rot.multiply(
                rot.axis_angle_to_quaternion([0, 1, 0], u[1]),
                rot.axis_angle_to_quaternion([1, 0, 0], u[2])))
        p = rot.rotate(q, chain.offsets[i] + p)
    return p


@pytest.mark.parametrize('parameterization', sorted(KINDS))
@settings(max_examples=50)
@given(seed=st.integers(0, 2**32 - 1))
def test_forward_and_jacobian(parameterization, seed):
    chain, params = random_chain(np.random.default_rng(seed), parameterization)
    np.testing.assert_allclose(chain.forward(params)[0], independent_forward(chain, params),
                               atol=1e-12)
    jac = chain.jacobian(params)
    h = 1e-6
    numeric = np.empty_like(jac)
    for i in range(chain.n):
        for j in range(3):
            e = np.zeros_like(params)
            e[0, i, j] = h
            numeric[:, :, 3 * i + j] = (chain.forward(params + e) - chain.forward(params - e)) \
                / (2 * h)
    np.testing.assert_allclose(jac, numeric, atol=1e-8)


@pytest.mark.parametrize('parameterization', sorted(KINDS))
def test_update_moves_the_effector_one_step_toward_the_target(parameterization):
    chain, params = random_chain(np.random.default_rng(3), parameterization)
    target = np.array([[0.4, -0.2, 0.9]])
    before = np.linalg.norm(target - chain.forward(params))
    assert chain.update(params, target, 1e-3).all()
    after = np.linalg.norm(target - chain.forward(params))
    assert before - after == pytest.approx(1e-3, rel=1e-3)  # first-order accurate step
    # Done when closer than one step: nothing moves.
    params2 = params.copy()
    close = chain.forward(params) + np.array([[1e-4, 0.0, 0.0]])
    assert not chain.update(params2, close, 1e-3).any()
    np.testing.assert_array_equal(params2, params)


@given(st.floats(min_value=np.pi / 2 + 1e-6, max_value=np.pi), st.integers(0, 2**32 - 1))
def test_long_log_quaternions_are_swapped_for_the_same_rotation(length, seed):
    axis = np.random.default_rng(seed).normal(size=3)
    u = length * axis / np.linalg.norm(axis)
    params = np.array([[u, 0.1 * u / length]])  # one long, one short
    balljoint._swap_long_logs(params)
    assert np.linalg.norm(params[0, 0]) <= np.pi / 2
    np.testing.assert_allclose(rot.quaternion_to_matrix(rot.exp(params[0, 0])),
                               rot.quaternion_to_matrix(rot.exp(u)), atol=1e-12)
    np.testing.assert_array_equal(params[0, 1], 0.1 * u / length)


def test_updates_keep_log_quaternions_short():
    chain = BallJointChain([[0.0, 0.0, 1.0]], 'quaternion')
    params = np.array([[[1.5, 0.3, 0.2]]])  # |u| just below pi / 2
    target = chain.forward(params) + np.array([[0.3, 0.3, 0.0]])
    for _ in range(300):
        chain.update(params, target, 1e-2)
        assert np.linalg.norm(params[0, 0]) <= np.pi / 2 + 1e-12


@given(st.integers(0, 2**32 - 1), st.booleans())
def test_minimum_norm_solution_is_the_pseudo_inverse(seed, deficient):
    rng = np.random.default_rng(seed)
    jac = rng.normal(size=(4, 3, 15))
    if deficient:
        jac[1, 2] = 2.0 * jac[1, 0]  # rank 2
    dp = rng.normal(size=(4, 3))
    expected = np.einsum('nij,nj->ni', np.linalg.pinv(jac), dp)
    np.testing.assert_allclose(minimum_norm_solution(jac, dp), expected, atol=1e-10)


@pytest.mark.parametrize('parameterization', sorted(KINDS))
@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_update_equals_numpy(parameterization, seed):
    chain, params = random_chain(np.random.default_rng(seed), parameterization)
    target = np.random.default_rng(seed + 1).uniform(-2, 2, size=(1, 3))
    expected = params.copy()
    moved = chain.update(expected, target, 1e-2)
    got = params[0].copy()
    status = jit.update(chain.offsets, got, target[0], 1e-2, KINDS[parameterization])
    assert status == int(moved[0])
    np.testing.assert_allclose(got, expected[0], atol=1e-11)


@pytest.mark.parametrize('parameterization', sorted(KINDS))
def test_seed000_experiment_update_counts(parameterization):
    # Update-count accuracy of the article's experiment on 10 seeded trials,
    # the compiled run equal to the numpy reference trial by trial.
    ypr = seed000.start_poses(np.random.default_rng(0), 10)
    used, ideal, _, _ = seed000.run_trials(ypr, parameterization)
    c_used, c_ideal, _ = seed000.compiled_trials(ypr, parameterization)
    np.testing.assert_array_equal(c_ideal, ideal)
    np.testing.assert_array_equal(c_used, used)
    assert np.sqrt(np.mean((used - ideal) ** 2.0)) <= 1.0
    assert np.all(ideal > 1000)  # the targets are metres away: a real test


def test_invalid_chains_are_rejected():
    with pytest.raises(InvalidInputError, match='quaternion, euler'):
        BallJointChain([[0, 0, 1]], 'matrix')
    with pytest.raises(InvalidInputError, match=r'\(n, 3\)'):
        BallJointChain([0, 0, 1])
    chain = BallJointChain([[0, 0, 1]] * 2)
    with pytest.raises(InvalidInputError, match=r'\(N, 2, 3\)'):
        chain.forward(np.zeros((1, 3, 3)))
