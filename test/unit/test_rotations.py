# SPDX-License-Identifier: Apache-2.0

"""Rotation core: identities, round trips, derivatives, independent reference."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node.core import rotations as rot
from ik_node.core.errors import IKError, InvalidInputError, ZeroNormError
import numpy as np
import pytest
from strategies import log_vectors, same_rotation, unit_quaternions, vectors3
import transforms3d

# Central differences with step h have truncation error ~h^2 |f'''| / 6 and
# rounding error ~eps / h; h = 1e-6 balances both near 1e-10 for these O(1)
# functions, well inside the 1e-7 relative bound the issue asks for.
FD_STEP = 1e-6
FD_RTOL = 1e-7


def wxyz(q):
    """(x, y, z, w) -> transforms3d's (w, x, y, z)."""
    return np.array([q[3], q[0], q[1], q[2]])


def xyzw(q):
    """transforms3d's (w, x, y, z) -> (x, y, z, w)."""
    return np.array([q[1], q[2], q[3], q[0]])


def central_difference(f, x, h=FD_STEP):
    """Jacobian of f at x by central differences; axis -1 is d/dx_j."""
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.stack(cols, axis=-1)


def relative_error(approx, exact):
    """Return ||approx - exact|| / max(||exact||, 1) (Frobenius)."""
    return np.linalg.norm(approx - exact) / max(np.linalg.norm(exact), 1.0)


# --- algebra ----------------------------------------------------------------

@given(unit_quaternions(), unit_quaternions())
def test_product_matches_reference_and_matrix_composition(a, b):
    ab = rot.multiply(a, b)
    np.testing.assert_allclose(ab, xyzw(transforms3d.quaternions.qmult(wxyz(a), wxyz(b))),
                               atol=1e-14)
    np.testing.assert_allclose(rot.quaternion_to_matrix(ab),
                               rot.quaternion_to_matrix(a) @ rot.quaternion_to_matrix(b),
                               atol=1e-12)


@given(unit_quaternions(), vectors3())
def test_rotate_equals_matrix_times_vector_and_reference(q, v):
    expected = rot.quaternion_to_matrix(q) @ v
    np.testing.assert_allclose(rot.rotate(q, v), expected, atol=1e-12)
    np.testing.assert_allclose(
        rot.rotate(q, v), transforms3d.quaternions.rotate_vector(v, wxyz(q)), atol=1e-12)


@given(unit_quaternions())
def test_inverse_and_conjugate(q):
    identity = np.array([0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(rot.multiply(q, rot.inverse(q)), identity, atol=1e-14)
    np.testing.assert_allclose(rot.conjugate(q), rot.inverse(q), atol=1e-15)
    scaled = 3.0 * q
    np.testing.assert_allclose(rot.multiply(rot.inverse(scaled), scaled), identity,
                               atol=1e-14)


def test_hamilton_convention_i_times_j_is_k():
    i, j, k = np.eye(4)[0], np.eye(4)[1], np.eye(4)[2]
    np.testing.assert_array_equal(rot.multiply(i, j), k)
    np.testing.assert_array_equal(rot.multiply(j, i), -k)


def test_quarter_turn_about_z_maps_x_to_y():
    # Right-handed, column vectors: +90 degrees about z takes x to y (REP 103).
    q = rot.axis_angle_to_quaternion([0, 0, 1], np.pi / 2)
    np.testing.assert_allclose(rot.rotate(q, [1.0, 0, 0]), [0, 1.0, 0], atol=1e-15)


# --- matrices ---------------------------------------------------------------

@given(unit_quaternions())
def test_matrix_is_orthonormal_matches_reference_and_round_trips(q):
    m = rot.quaternion_to_matrix(q)
    np.testing.assert_allclose(m.T @ m, np.eye(3), atol=1e-14)
    assert np.linalg.det(m) == pytest.approx(1.0, abs=1e-13)
    np.testing.assert_allclose(m, transforms3d.quaternions.quat2mat(wxyz(q)), atol=1e-14)
    back = rot.matrix_to_quaternion(m)
    assert back[3] >= 0.0
    assert np.linalg.norm(back) == pytest.approx(1.0, abs=1e-15)
    assert same_rotation(back, q, atol=1e-12)


@pytest.mark.parametrize('trace_case', ['w', 'x', 'y', 'z'])
def test_matrix_to_quaternion_for_every_largest_diagonal(trace_case):
    # Rotations whose Shepperd pivot is each of the four components in turn,
    # including exact half-turns (trace = -1) where w = 0.
    axes = {'w': ([1, 2, 3], 0.3), 'x': ([1, 0, 0], np.pi), 'y': ([0, 1, 0.01], np.pi),
            'z': ([0.01, 0.02, 1], np.pi - 1e-9)}
    axis, angle = axes[trace_case]
    q = rot.axis_angle_to_quaternion(axis, angle)
    back = rot.matrix_to_quaternion(rot.quaternion_to_matrix(q))
    assert same_rotation(back, q, atol=1e-12)
    ref = xyzw(transforms3d.quaternions.mat2quat(rot.quaternion_to_matrix(q)))
    assert same_rotation(back, ref, atol=1e-12)


def test_matrix_to_quaternion_rejects_non_rotations():
    with pytest.raises(InvalidInputError, match='orthonormal'):
        rot.matrix_to_quaternion(2.0 * np.eye(3))
    with pytest.raises(InvalidInputError, match='reflection'):
        rot.matrix_to_quaternion(np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(InvalidInputError, match=r'\(3, 3\)'):
        rot.matrix_to_quaternion(np.eye(4))


# --- axis-angle, exp and log -------------------------------------------------

@given(unit_quaternions())
def test_axis_angle_round_trip_and_reference(q):
    axis, angle = rot.quaternion_to_axis_angle(q)
    assert 0.0 <= angle <= np.pi
    assert np.linalg.norm(axis) == pytest.approx(1.0, abs=1e-12)
    assert same_rotation(rot.axis_angle_to_quaternion(axis, angle), q, atol=1e-12)
    ref_axis, ref_angle = transforms3d.quaternions.quat2axangle(wxyz(q if q[3] >= 0 else -q))
    if angle > 1e-6:
        assert angle == pytest.approx(ref_angle, abs=1e-9)
        np.testing.assert_allclose(axis, ref_axis, atol=1e-8)


@given(unit_quaternions())
def test_exp_of_log_is_identity(q):
    u = rot.log(q)
    assert np.linalg.norm(u) <= np.pi + 1e-15
    np.testing.assert_allclose(rot.exp(u), q, atol=1e-12)


@given(log_vectors())
def test_log_of_exp_is_identity_below_pi(u):
    np.testing.assert_allclose(rot.log(rot.exp(u)), u, atol=1e-9, rtol=1e-9)


@given(unit_quaternions())
def test_log_matches_reference_and_half_angle_definition(q):
    # transforms3d's qlog is the quaternion logarithm (log|q|, theta * v / |v|)
    # with theta = acos(w): the seed's half-angle definition.
    u = rot.log(q)
    if np.linalg.norm(q[:3]) > 1e-6:
        np.testing.assert_allclose(u, transforms3d.quaternions.qlog(wxyz(q))[1:], atol=1e-9)
    # The rotation vector is 2 log(q): its norm is the rotation angle (mod 2 pi).
    _, angle = rot.quaternion_to_axis_angle(q)
    two_u = 2.0 * np.linalg.norm(u)
    assert min(abs(two_u - angle), abs(2 * np.pi - two_u - angle)) < 1e-9


@given(log_vectors())
def test_exp_is_unit_and_matches_reference(u):
    q = rot.exp(u)
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-15)
    ref = xyzw(transforms3d.quaternions.qexp(np.concatenate(([0.0], u))))
    np.testing.assert_allclose(q, ref, atol=1e-15)


def test_log_series_branch_is_exact_near_identity():
    for half in [1e-300, 1e-12, 1e-8, 1e-7, 9.99e-7, 1.01e-6]:
        u = np.array([half, 0.0, 0.0])
        q = np.array([np.sin(half), 0.0, 0.0, np.cos(half)])
        np.testing.assert_allclose(rot.log(q), u, rtol=1e-15, atol=0)
        np.testing.assert_allclose(rot.exp(u), q, rtol=1e-15, atol=0)


def test_log_of_minus_identity_is_a_finite_full_turn():
    u = rot.log([0.0, 0.0, 0.0, -1.0])
    assert np.all(np.isfinite(u))
    assert np.linalg.norm(u) == pytest.approx(np.pi)
    np.testing.assert_allclose(rot.exp(u), [0, 0, 0, -1.0], atol=1e-15)


def test_log_is_continuous_through_the_half_turn():
    axis = np.array([0.6, 0.0, 0.8])
    halves = np.pi / 2 + np.linspace(-1e-6, 1e-6, 21)
    qs = np.concatenate((np.sin(halves)[:, None] * axis, np.cos(halves)[:, None]), axis=1)
    norms = np.linalg.norm(rot.log(qs), axis=1)
    np.testing.assert_allclose(norms, halves, atol=1e-15)


# --- derivatives ------------------------------------------------------------

@settings(max_examples=200)
@given(log_vectors())
def test_dexp_matches_central_differences(u):
    analytic = rot.dexp(u)
    numeric = central_difference(rot.exp, u)
    assert analytic.shape == (4, 3)
    assert relative_error(analytic, numeric) <= FD_RTOL


@pytest.mark.parametrize('norm', [0.0, 1e-9, 1e-5, 0.00999, 0.01001, 1.0, 3.0])
def test_dexp_is_exact_across_its_series_boundary(norm):
    u = norm * np.array([0.48, -0.6, 0.64])
    numeric = central_difference(rot.exp, u)
    assert relative_error(rot.dexp(u), numeric) <= FD_RTOL


@given(log_vectors())
def test_dexp_is_tangent_to_the_unit_sphere(u):
    # d/du |exp(u)|^2 = 2 exp(u)^T dexp(u) = 0.
    np.testing.assert_allclose(rot.exp(u) @ rot.dexp(u), np.zeros(3), atol=1e-15)


@settings(max_examples=200)
@given(log_vectors())
def test_chain_rule_drot_dquat_dexp_matches_differences_of_matrix(u):
    analytic = np.einsum('ijk,kl->ijl', rot.drot_dquat(rot.exp(u)), rot.dexp(u))
    numeric = central_difference(lambda x: rot.quaternion_to_matrix(rot.exp(x)), u)
    assert relative_error(analytic, numeric) <= FD_RTOL


@given(unit_quaternions(), st.integers(min_value=0, max_value=2))
def test_drot_dquat_along_tangent_directions(q, which):
    # Any direction tangent to the unit sphere at q: project a basis vector.
    e = np.eye(4)[which] + np.eye(4)[3]
    tangent = e - (e @ q) * q
    if np.linalg.norm(tangent) < 1e-3:
        tangent = np.eye(4)[(which + 1) % 3] - q[(which + 1) % 3] * q
    tangent /= np.linalg.norm(tangent)

    def along(s):
        return rot.quaternion_to_matrix(q + s[0] * tangent)

    numeric = central_difference(along, np.zeros(1))[..., 0]
    analytic = rot.drot_dquat(q) @ tangent
    assert relative_error(analytic, numeric) <= FD_RTOL


# --- slerp ------------------------------------------------------------------

@given(unit_quaternions(), unit_quaternions())
def test_slerp_endpoints_and_constant_angular_speed(q0, q1):
    assert same_rotation(rot.slerp(q0, q1, 0.0), q0, atol=1e-12)
    assert same_rotation(rot.slerp(q0, q1, 1.0), q1, atol=1e-9)
    ts = np.linspace(0.0, 1.0, 11)
    path = rot.slerp(q0, q1, ts)
    np.testing.assert_allclose(np.linalg.norm(path, axis=1), 1.0, atol=1e-15)
    # Angle between consecutive samples is the same along the whole arc.
    dots = np.abs(np.sum(path[1:] * path[:-1], axis=1))
    steps = 2.0 * np.arccos(np.clip(dots, -1.0, 1.0))
    total = 2.0 * np.arccos(min(1.0, abs(float(q0 @ q1))))
    np.testing.assert_allclose(steps, total / 10.0, atol=1e-6)


def test_slerp_takes_the_shortest_path():
    q0 = rot.axis_angle_to_quaternion([0, 0, 1], 0.1)
    q1 = -rot.axis_angle_to_quaternion([0, 0, 1], 0.3)
    mid = rot.slerp(q0, q1, 0.5)
    assert same_rotation(mid, rot.axis_angle_to_quaternion([0, 0, 1], 0.2))


# --- angular velocity integration -------------------------------------------

@given(unit_quaternions(), vectors3(5.0), st.floats(min_value=1e-4, max_value=0.5))
def test_exact_integration_world_and_body(q, omega, dt):
    world = rot.integrate_angular_velocity(q, omega, dt, frame='world')
    rate = np.linalg.norm(omega)
    axis = omega / rate if rate > 0 else np.zeros(3)
    step = np.concatenate((np.sin(rate * dt / 2) * axis, [np.cos(rate * dt / 2)]))
    assert same_rotation(world, rot.multiply(step, q), atol=1e-12)
    # A body-frame rate w_b equals the world-frame rate R(q) w_b.
    body = rot.integrate_angular_velocity(q, omega, dt, frame='body')
    as_world = rot.integrate_angular_velocity(q, rot.rotate(q, omega), dt, frame='world')
    assert same_rotation(body, as_world, atol=1e-12)


def test_first_order_integration_converges_quadratically():
    q0 = rot.axis_angle_to_quaternion([1, 2, 3], 0.7)
    omega = np.array([0.4, -1.1, 2.0])
    total = 1.0
    exact = rot.integrate_angular_velocity(q0, omega, total)

    def error(steps):
        q = q0
        for _ in range(steps):
            q = rot.integrate_angular_velocity(q, omega, total / steps, method='first_order')
        return np.linalg.norm(rot.log(rot.multiply(rot.conjugate(exact), q)))

    ratio = error(100) / error(200)
    assert 3.8 < ratio < 4.2


def test_integration_rejects_unknown_options():
    with pytest.raises(InvalidInputError, match="'world' or 'body'"):
        rot.integrate_angular_velocity([0, 0, 0, 1], [0, 0, 1], 0.1, frame='tool')
    with pytest.raises(InvalidInputError, match='first_order'):
        rot.integrate_angular_velocity([0, 0, 0, 1], [0, 0, 1], 0.1, method='rk4')
    with pytest.raises(InvalidInputError, match='finite'):
        rot.integrate_angular_velocity([0, 0, 0, 1], [0, 0, 1], float('nan'))


# --- yaw-pitch-roll ---------------------------------------------------------

angles = st.floats(min_value=-np.pi, max_value=np.pi)


@given(angles, st.floats(min_value=-np.pi / 2, max_value=np.pi / 2), angles)
def test_ypr_matches_urdf_rpy_reference_and_round_trips(yaw, pitch, roll):
    m = rot.ypr_to_matrix(yaw, pitch, roll)
    # URDF rpy: fixed axes x (roll), then y (pitch), then z (yaw) = 'sxyz'.
    np.testing.assert_allclose(m, transforms3d.euler.euler2mat(roll, pitch, yaw, 'sxyz'),
                               atol=1e-14)
    y2, p2, r2 = rot.matrix_to_ypr(m)
    np.testing.assert_allclose(rot.ypr_to_matrix(y2, p2, r2), m, atol=1e-9)
    assert -np.pi / 2 <= p2 <= np.pi / 2


@pytest.mark.parametrize('pitch', [np.pi / 2, -np.pi / 2])
def test_ypr_gimbal_lock_sets_roll_to_zero(pitch):
    m = rot.ypr_to_matrix(0.4, pitch, 0.3)
    yaw, p, roll = rot.matrix_to_ypr(m)
    assert roll == 0.0
    assert p == pytest.approx(pitch)
    np.testing.assert_allclose(rot.ypr_to_matrix(yaw, p, roll), m, atol=1e-12)


# --- batches and validation --------------------------------------------------

def test_batched_calls_equal_single_calls():
    rng = np.random.default_rng(7)
    qs = rng.normal(size=(50, 4))
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    us = rng.normal(size=(50, 3))
    batched = (rot.log(qs), rot.exp(us), rot.dexp(us), rot.quaternion_to_matrix(qs),
               rot.matrix_to_quaternion(rot.quaternion_to_matrix(qs)), rot.drot_dquat(qs))
    for i in range(50):
        single = (rot.log(qs[i]), rot.exp(us[i]), rot.dexp(us[i]),
                  rot.quaternion_to_matrix(qs[i]),
                  rot.matrix_to_quaternion(rot.quaternion_to_matrix(qs[i])),
                  rot.drot_dquat(qs[i]))
        for b, s in zip(batched, single):
            np.testing.assert_allclose(b[i], s, atol=1e-15)


@pytest.mark.parametrize('bad, kind, pattern', [
    ([0.0, 0.0, 0.0, 0.0], ZeroNormError, 'norm 0 is below'),
    ([1e-9, 0.0, 0.0, 0.0], ZeroNormError, 'non-zero quaternion'),
    ([float('nan'), 0, 0, 1], InvalidInputError, 'NaN or inf'),
    ([float('inf'), 0, 0, 1], InvalidInputError, 'NaN or inf'),
    ([0.0, 0.0, 1.0], InvalidInputError, r'expected trailing shape \(4,\), received shape \(3,\)'),
    ('abcd', InvalidInputError, 'received str'),
])
def test_invalid_quaternions_raise_clear_errors(bad, kind, pattern):
    for fn in (rot.log, rot.quaternion_to_matrix, rot.normalize, rot.drot_dquat):
        with pytest.raises(kind, match=pattern):
            fn(bad)


def test_every_error_is_an_ik_error():
    with pytest.raises(IKError):
        rot.exp([1.0, 2.0])
    with pytest.raises(IKError):
        rot.axis_angle_to_quaternion([0.0, 0.0, 0.0], 1.0)
    with pytest.raises(ValueError):
        rot.rotate([0, 0, 0, 1], [1.0, float('nan'), 0.0])


# --- the single-element fast path equals the vectorised path ----------------

@settings(max_examples=300)
@given(unit_quaternions(), unit_quaternions(), log_vectors(), vectors3())
def test_single_fast_path_equals_batch_path(q, p, u, v):
    # Every property above runs through the single-element path; this pins
    # the vectorised path (used for batches) to it, bit for bit up to 4 ulp.
    m = rot.quaternion_to_matrix(q)
    pairs = [
        (rot.log(q), rot.log(q[None])[0]),
        (rot.exp(u), rot.exp(u[None])[0]),
        (rot.dexp(u), rot.dexp(u[None])[0]),
        (m, rot.quaternion_to_matrix(q[None])[0]),
        (rot.matrix_to_quaternion(m), rot.matrix_to_quaternion(m[None])[0]),
        (rot.multiply(q, p), rot.multiply(q[None], p[None])[0]),
        (rot.rotate(q, v), rot.rotate(q[None], v[None])[0]),
        (rot.normalize(3.0 * q), rot.normalize(3.0 * q[None])[0]),
    ]
    for single, batch in pairs:
        np.testing.assert_allclose(single, batch, rtol=1e-15, atol=1e-15)


def test_single_path_accepts_lists_and_ints_and_defers_errors():
    np.testing.assert_array_equal(rot.exp([0, 0, 0]), [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(rot.normalize((0, 0, 0, 2)), [0.0, 0.0, 0.0, 1.0])
    # Invalid single inputs go to the checked path and raise its errors.
    with pytest.raises(InvalidInputError, match='NaN or inf'):
        rot.exp([0.0, float('nan'), 0.0])
    with pytest.raises(ZeroNormError):
        rot.log((0.0, 0.0, 0.0, 0.0))
    with pytest.raises(InvalidInputError, match='NaN or inf'):
        rot.matrix_to_quaternion(np.full((3, 3), np.nan))
    with pytest.raises(InvalidInputError, match='orthonormal'):
        rot.matrix_to_quaternion(np.eye(3) + 1e-3)
