# SPDX-License-Identifier: Apache-2.0

"""Analytic SRS IK: model recognition, every branch, swivel intervals, pole, edge cases."""

import math
from pathlib import Path

from hypothesis import assume, example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node import AnalyticSRS, Chain, InvalidInputError, JacobianIK, ModelError
from ik_node.bench.analytic import offset_copy
from ik_node.core import rotations as rot
from ik_node.core.ik.closed_form.base import BRANCHES
from ik_node.core.ik.closed_form.srs import OUT_OF_REACH_BEND
from models import reference_forward
import numpy as np
from oracle import forward, pose_errors
import pytest

ROOT = Path(__file__).resolve().parents[2]
IIWA = ROOT / 'urdf' / 'iiwa14.urdf'
CHAIN = Chain.from_urdf_file(str(IIWA), 'iiwa_link_0', 'tool0')
ARMS = {backend: AnalyticSRS.from_chain(CHAIN, backend=backend)
        for backend in ('numpy', 'numba')}
BACKENDS = pytest.mark.parametrize('backend', sorted(ARMS))
EXACT = 1e-9  # the bound on residuals of the closed form, m and rad


def pose_gap(a, b):
    """Position (m) and angle (rad) between two poses (atan2: exact near 0, unlike acos)."""
    r = a[:3, :3].T @ b[:3, :3]
    sin = 0.5 * np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    return np.linalg.norm(a[:3, 3] - b[:3, 3]), np.arctan2(sin, (np.trace(r) - 1.0) / 2.0)


def random_q(rng):
    """Draw joints uniformly within the iiwa's limits."""
    return rng.uniform(CHAIN.lower, CHAIN.upper)


def elbow_point(q):
    """Elbow centre of configuration q by FK: joint 4's frame origin (on the iiwa)."""
    return np.array(CHAIN.frames(np.asarray(q, float).tolist())[0][3][9:])


def test_model_is_read_from_the_chain():
    m = ARMS['numpy'].model
    np.testing.assert_allclose(m.shoulder, [0, 0, 0.36], atol=1e-12)
    np.testing.assert_allclose(m.elbow0, [0, 0, 0.78], atol=1e-12)
    np.testing.assert_allclose(m.wrist0, [0, 0, 1.18], atol=1e-12)
    assert m.upper_arm == pytest.approx(0.42) and m.forearm == pytest.approx(0.40)
    np.testing.assert_allclose(m.wrist_in_tip, [0, 0, -0.126], atol=1e-12)


@pytest.mark.parametrize('edit, pattern', [
    (('<origin xyz="0 0 0.2155" rpy="0 0 0"/>\n    <axis xyz="0 1 0"/>',
      '<origin xyz="0.012 0 0.2155" rpy="0 0 0"/>\n    <axis xyz="0 1 0"/>'),
     r'axes of joints 5-7 \(wrist\) miss each other by 0.012 m'),
    (('<origin xyz="0 0 0.2025" rpy="0 0 0"/>', '<origin xyz="0.03 0 0.2025" rpy="0 0 0"/>'),
     r'axes of joints 1-3 \(shoulder\) miss each other by 0.03 m'),
    (('<origin xyz="0 0 0.1845" rpy="0 0 0"/>', '<origin xyz="0 0.01 0.1845" rpy="0 0 0"/>'),
     'project onto the elbow axis \\(joint 4\\) 0.01 m apart'),
])
def test_non_srs_chains_are_refused_with_the_failed_condition(edit, pattern):
    text = IIWA.read_text()
    assert edit[0] in text
    chain = Chain.from_urdf_string(text.replace(edit[0], edit[1], 1), 'iiwa_link_0', 'tool0')
    with pytest.raises(ModelError, match=pattern):
        AnalyticSRS.from_chain(chain, near_bound=0.0)   # exact SRS arms only


def test_six_dof_arm_is_not_srs():
    ur = Chain.from_urdf_file(str(ROOT / 'urdf' / 'ur5e.urdf'), 'base_link', 'tool0')
    with pytest.raises(ModelError, match='6 free joints, an SRS arm has 7'):
        AnalyticSRS.from_chain(ur)


@BACKENDS
@settings(max_examples=150)
@given(seed=st.integers(0, 2**32 - 1))
def test_solve_all_contains_q_and_every_branch_reaches_the_pose(backend, seed):
    arm = ARMS[backend]
    q = random_q(np.random.default_rng(seed))
    target = CHAIN.forward(q)
    solutions = arm.solve_all(target, arm.swivel_of(q))
    assert any(np.allclose(s, q, atol=1e-9) for s in solutions)
    assert 1 <= len(solutions) <= 8
    xml = IIWA.read_text()
    for s in solutions:
        assert CHAIN.within_limits(s)
        reached = reference_forward(xml, 'iiwa_link_0', 'tool0', dict(zip(CHAIN.joint_names, s)))
        pos, ang = pose_gap(reached, target)
        assert pos <= EXACT and ang <= EXACT
        assert arm.swivel_of(s) == pytest.approx(arm.swivel_of(q), abs=1e-9)


@BACKENDS
def test_a_pose_with_a_joint_at_its_limit_keeps_its_own_branch(backend):
    """Each joint in turn on each of its limits, the others drawn: q is among the solutions.

    A solution exactly at a limit is computed a few ulps beyond it (or, for
    a joint whose range passes pi, at its wrapped value, a few ulps beyond
    after the shift by 2 pi); it is put on the limit, not dropped (2 of
    these 280 poses lost their own branch before).
    """
    arm = ARMS[backend]
    rng = np.random.default_rng(1)
    for j in range(7):
        for limit in (CHAIN.lower[j], CHAIN.upper[j]):
            for _ in range(20):
                q = random_q(rng)
                q[j] = limit
                solutions = arm.solve_all(CHAIN.forward(q), arm.swivel_of(q))
                assert any(np.allclose(s, q, atol=1e-9) for s in solutions), (j, q)
                assert all(CHAIN.within_limits(s) for s in solutions)


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1))
@example(seed=505)   # q6 ~ 0 at psi ~ 0.166: q5 turns through +-pi within a grid step
def test_swivel_intervals_are_exact(seed):
    arm = ARMS['numba']
    rng = np.random.default_rng(seed)
    q = random_q(rng)
    target = CHAIN.forward(q)
    branch = arm.branch_of(q)
    intervals = arm.feasible_swivel(target, branch)
    psi_q = arm.swivel_of(q)
    assert any(a - 1e-9 <= psi_q <= b + 1e-9 for a, b in intervals)  # q itself is feasible

    def joints(psi):
        return arm._solve_batch(target[None], np.array([psi]), np.array([branch], float),
                                np.zeros(1), np.zeros(1))[0]

    for a, b in intervals:
        for psi in np.linspace(a, b, 9)[1:-1]:
            assert CHAIN.within_limits(joints(psi))
        for psi, edge in ((a - 1e-6, -np.pi), (b + 1e-6, np.pi)):
            if abs(psi - edge) > 2e-6:  # interval edges at +-pi are wrap-around, not limits
                assert not CHAIN.within_limits(joints(psi))


@BACKENDS
@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1))
def test_solve_with_reference_returns_the_reference(backend, seed):
    q = random_q(np.random.default_rng(seed))
    res = ARMS[backend].solve(CHAIN.forward(q), q_reference=q)
    assert res.success and res.reason == ''
    np.testing.assert_allclose(res.q, q, atol=1e-9)
    assert res.position_error <= EXACT and res.orientation_error <= EXACT


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1))
def test_analytic_and_jacobian_solvers_reach_the_same_pose(seed):
    rng = np.random.default_rng(seed)
    target = CHAIN.forward(random_q(rng))
    analytic = ARMS['numba'].solve(target, swivel=rng.uniform(-np.pi, np.pi))
    numeric = JacobianIK(CHAIN, timeout_s=1.0).solve(target, CHAIN.mid_limits())
    assert numeric.success
    if analytic.success:  # this swivel may be infeasible only through joint limits
        pos, ang = pose_gap(CHAIN.forward(analytic.q), CHAIN.forward(numeric.q))
        assert pos < 2e-6 and ang < 4e-6
    else:
        assert CHAIN.within_limits(analytic.q)
    # Seeded with the analytic answer, the numerical solver has nothing to do.
    again = JacobianIK(CHAIN).solve(target, ARMS['numba'].solve(target, q_reference=numeric.q).q)
    assert again.success and again.iterations == 0


@BACKENDS
def test_moving_target_gives_continuous_motion_with_the_reference(backend):
    arm = ARMS[backend]
    rng = np.random.default_rng(4)
    q = np.array([0.3, 0.8, -0.4, -1.2, 0.5, 0.9, 0.2])
    start = CHAIN.forward(q)
    for k in range(1, 201):  # 0.5 mm and 2.5 mrad per step
        target = start.copy()
        target[:3, 3] += 5e-4 * k * np.array([0.6, -0.48, 0.64])
        target[:3, :3] = rot.quaternion_to_matrix(
            rot.axis_angle_to_quaternion([0.2, 0.9, -0.4], 2.5e-3 * k)) @ start[:3, :3]
        res = arm.solve(target, q_reference=q)
        assert res.success, res.reason
        assert np.max(np.abs(res.q - q)) < 0.02
        q = res.q
    assert rng is not None


@BACKENDS
@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1))
def test_pole_turns_the_elbow_toward_it(backend, seed):
    arm = ARMS[backend]
    rng = np.random.default_rng(seed)
    q = random_q(rng)
    target = CHAIN.forward(q)
    pole = arm.model.shoulder + rng.uniform(-1.0, 1.0, size=3)
    res = arm.solve(target, pole=pole)
    psi = arm.swivel_toward(target, pole)
    branch = arm.branch_of(res.q)
    if abs(arm.swivel_of(res.q) - psi) > 1e-9:
        return  # limits moved the swivel: covered by the interval test
    grid = np.linspace(-np.pi, np.pi, 721)
    qs = arm._solve_batch(np.broadcast_to(target, (721, 4, 4)), grid,
                          np.tile(np.array(branch, float), (721, 1)), np.zeros(721), np.zeros(721))
    elbows = [elbow_point(q_grid) for q_grid in qs]
    chosen = np.linalg.norm(elbow_point(res.q) - pole)
    assert chosen <= min(np.linalg.norm(e - pole) for e in elbows) + 1e-9


@BACKENDS
def test_out_of_reach_and_too_close_give_the_closest_reachable_pose(backend):
    arm = ARMS[backend]
    m = arm.model
    reach = m.upper_arm + m.forearm
    for distance, word in ((1.5, 'out of reach'), (0.005, 'too close')):
        target = np.eye(4)
        direction = np.array([0.6, 0.0, 0.8])
        target[:3, 3] = m.shoulder + distance * direction - m.wrist_in_tip
        res = arm.solve(target)
        assert not res.success and word in res.reason
        assert np.all(np.isfinite(res.q)) and CHAIN.within_limits(res.q)
        tip = CHAIN.forward(res.q)
        wrist = tip[:3, 3] + tip[:3, :3] @ m.wrist_in_tip
        # Folding is bounded by the elbow's limit (+-120 deg), not by |L1 - L2|.
        expected = reach if distance > reach else m.reach_low
        assert m.reach_low > abs(m.upper_arm - m.forearm) + 0.1
        assert np.linalg.norm(wrist - m.shoulder) == pytest.approx(expected, abs=1e-9)
        assert res.orientation_error < 1e-9  # orientation is kept


@BACKENDS
def test_singular_cases_are_deterministic_and_finite(backend):
    arm = ARMS[backend]
    m = arm.model
    cases = {
        'wrist straight above the shoulder (on the first axis)':
            np.array([0.0, 0.0, 0.0, -1.0, 0.0, 0.5, 0.0]),
        'wrist singular (q6 = 0)': np.array([0.4, 0.7, -0.2, -1.1, 0.9, 0.0, -0.6]),
        'stretched elbow (q4 = 0)': np.array([0.3, 0.5, 0.2, 0.0, 0.1, 0.4, 0.0]),
        'zero configuration': np.zeros(7),
    }
    for name, q in cases.items():
        target = CHAIN.forward(q)
        first = arm.solve(target, q_reference=q)
        second = arm.solve(target, q_reference=q)
        np.testing.assert_array_equal(first.q, second.q)
        assert np.all(np.isfinite(first.q)), name
        assert first.success, (name, first.reason)
        pos, ang = pose_gap(CHAIN.forward(first.q), target)
        assert pos < 1e-9 and ang < 1e-7, name
        # At the singularity the free sum is kept from the reference.
        if 'q6' in name:
            assert first.q[4] + first.q[6] == pytest.approx(q[4] + q[6], abs=1e-9)
        assert m is not None


@BACKENDS
def test_wrist_singularity_is_crossed_continuously(backend):
    arm = ARMS[backend]
    q = np.array([0.4, 0.7, -0.2, -1.1, 0.9, 0.05, -0.6])
    for q6 in np.linspace(0.05, -0.05, 41):
        target = CHAIN.forward(np.array([0.4, 0.7, -0.2, -1.1, 0.9, q6, -0.6]))
        res = arm.solve(target, q_reference=q)
        assert res.success
        assert np.max(np.abs(res.q - q)) < 0.01
        q = res.q


def test_backends_agree_including_the_limit_search():
    rng = np.random.default_rng(12)
    for _ in range(15):
        q = random_q(rng)
        target = CHAIN.forward(q)
        for kwargs in ({'swivel': rng.uniform(-np.pi, np.pi)}, {}, {'pole': [1.0, 0.0, 0.5]}):
            a = ARMS['numba'].solve(target, **kwargs)
            b = ARMS['numpy'].solve(target, **kwargs)
            assert a.success == b.success
            np.testing.assert_allclose(a.q, b.q, atol=1e-8)


def test_invalid_inputs_are_rejected():
    arm = ARMS['numba']
    target = CHAIN.forward(np.zeros(7))
    with pytest.raises(InvalidInputError, match='finite'):
        arm.solve(np.full((4, 4), np.nan))
    with pytest.raises(InvalidInputError, match='swivel'):
        arm.solve(target, swivel=float('inf'))
    with pytest.raises(InvalidInputError, match='pole'):
        arm.solve(target, pole=[0.0, np.nan, 1.0])
    with pytest.raises(InvalidInputError, match='three signs'):
        arm.feasible_swivel(target, (1, 0, 1))
    with pytest.raises(InvalidInputError, match='backend'):
        AnalyticSRS.from_chain(CHAIN, backend='gpu')
    assert len(BRANCHES) == 8


@BACKENDS
def test_solve_batch_matches_single_solves_and_flags_invalid_rows(backend):
    arm = ARMS[backend]
    rng = np.random.default_rng(9)
    qs = rng.uniform(CHAIN.lower, CHAIN.upper, size=(50, 7))
    targets = np.array([CHAIN.forward(q) for q in qs])
    psi = np.array([arm.swivel_of(q) for q in qs])
    branches = np.array([arm.branch_of(q) for q in qs], dtype=float)
    targets[7, :3, 3] += [3.0, 0.0, 0.0]  # out of reach
    q_batch, valid = arm.solve_batch(targets, psi, branches)
    assert not valid[7] and valid[np.arange(50) != 7].all()
    mask = np.arange(50) != 7
    np.testing.assert_allclose(q_batch[mask], qs[mask], atol=1e-9)
    with pytest.raises(InvalidInputError, match=r'\(N, 4, 4\)'):
        arm.solve_batch(targets[0], 0.0, (1, 1, 1))


@given(st.integers(0, 2**32 - 1), st.sampled_from(['valid', 'nan', 'scaled', 'reflected',
                                                   'last_row', 'sheared']))
def test_compiled_pose_check_agrees_with_check_pose(seed, kind):
    from ik_node.core.kernels.compile import K
    from ik_node.core.ik.base import check_pose
    from ik_node.core.kernels.base import ORTHONORMAL_TOL
    pose = CHAIN.forward(random_q(np.random.default_rng(seed)))
    if kind == 'nan':
        pose[1, 2] = np.nan
    elif kind == 'scaled':
        pose[:3, :3] *= 1.001
    elif kind == 'reflected':
        pose[:3, 0] *= -1.0
    elif kind == 'last_row':
        pose[3, 0] = 1e-9
    elif kind == 'sheared':
        pose[0, 1] += 1e-5
    try:
        check_pose(pose)
        valid = True
    except InvalidInputError:
        valid = False
    assert K.is_rigid_transform(pose, ORTHONORMAL_TOL) == valid
    assert valid == (kind == 'valid')


@BACKENDS
def test_holding_a_stretched_arm_does_not_chatter(backend):
    # Regression (seen in the demo): holding the closest pose to an unreachable
    # target leaves the elbow stretched, where the reference's swivel is noise;
    # joints 3, 5 and 7 chattered by ~0.1 rad between identical solves.
    arm = ARMS[backend]
    target = np.eye(4)
    target[:3, :3] = rot.quaternion_to_matrix(rot.axis_angle_to_quaternion([0, 1, 0], np.pi))
    target[:3, 3] = [2.0, 0.0, 0.5]  # out of reach: the arm stretches toward it
    q = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0])
    history = []
    for _ in range(30):
        res = arm.solve(target, q_reference=q)
        assert np.all(np.isfinite(res.q)) and CHAIN.within_limits(res.q)
        history.append(res.q)
        q = res.q
    steps = np.abs(np.diff(np.array(history[5:]), axis=0))
    assert steps.max() < 1e-6


# -- near-SRS arms: the nearest exact SRS model, then a polish on the true chain ----------


def offset_iiwa(millimetres, seed):
    """Return the bundled iiwa14 with joints 2-7 moved sideways by ``millimetres`` (random)."""
    text = offset_copy(IIWA.read_text(), millimetres, seed)
    return Chain.from_urdf_string(text, 'iiwa_link_0', 'tool0')


NEAR = {mm: offset_iiwa(mm, seed) for mm, seed in ((0.1, 1), (0.436, 2), (3.0, 3))}


def test_an_exact_arm_keeps_the_closed_form_and_a_near_one_reports_its_deviation():
    assert ARMS['numpy'].deviation == 0.0 and ARMS['numpy'].model_note == 'exact SRS arm'
    for mm, chain in NEAR.items():
        with pytest.raises(ModelError, match='miss each other'):
            AnalyticSRS.from_chain(chain, near_bound=0.0)
        solver = AnalyticSRS.from_chain(chain)
        # Each joint moved by mm: no meeting point is farther than the offsets allow.
        assert 1e-6 < solver.deviation <= 2.0 * 1e-3 * mm * math.sqrt(3.0)
        assert 'near-SRS' in solver.model_note


def test_beyond_the_bound_the_reason_says_by_how_much():
    with pytest.raises(ModelError, match=r'deviates by 0\.0[0-9]+ m, beyond the near-SRS bound '
                                         r'0\.01 m'):
        AnalyticSRS.from_chain(offset_iiwa(25.0, 4))


@BACKENDS
@pytest.mark.parametrize('mm', sorted(NEAR))
def test_near_srs_solutions_are_exact_on_the_true_chain(backend, mm):
    """FK-built targets (independent FK): residual <= 1e-9, within limits, from a reference."""
    chain = NEAR[mm]
    solver = AnalyticSRS.from_chain(chain, backend=backend)
    rng = np.random.default_rng(int(mm * 10))
    for _ in range(150 if backend == 'numba' else 40):
        q = rng.uniform(chain.lower, chain.upper)
        target = forward(chain, q)
        reference = np.clip(q + rng.normal(0.0, 0.2, 7), chain.lower, chain.upper)
        res = solver.solve(target, reference)
        assert res.success, res.reason
        assert max(pose_errors(chain, res.q, target)) <= EXACT
        assert chain.within_limits(res.q)


@pytest.mark.parametrize('mm', sorted(NEAR))
def test_near_srs_branches_and_pole_keep_their_meaning(mm):
    """solve_all: every solution exact on the chain, near the model's, on its branch; pole.

    Away from singular configurations (joints 2, 4, 6 beyond 0.5 rad of zero:
    near them a branch label is ambiguous, the swivel ill-defined, and near
    a stretched elbow joint 4 moves like the square root of the deviation)
    every polished solution is within 0.05 rad of a model solution, with the
    same branch.
    """
    chain = NEAR[mm]
    solver = AnalyticSRS.from_chain(chain)
    exact_model = AnalyticSRS(chain, solver.model)   # the model's own closed form, no polish
    rng = np.random.default_rng(7)
    kept = total = 0
    for _ in range(30):
        q = rng.uniform(chain.lower, chain.upper)
        target = forward(chain, q)
        psi = float(rng.uniform(-np.pi, np.pi))
        for polished in solver.solve_all(target, psi):
            assert max(pose_errors(chain, polished, target)) <= EXACT
            # The same branch as the nearest model solution (the polish moves ~deviation).
            nearest = min(exact_model._solve_batch(target[None].repeat(8, 0), np.full(8, psi),
                                                   BRANCHES, np.zeros(8), np.zeros(8)),
                          key=lambda m: float(np.max(np.abs(m - polished))))
            if np.min(np.abs(nearest[[1, 3, 5]])) < 0.5:
                continue  # near a singular shoulder, elbow or wrist: labels are ambiguous
            total += 1
            kept += solver.branch_of(polished) == solver.branch_of(nearest)
            assert float(np.max(np.abs(nearest - polished))) < 0.05
        # A pole: the configuration the model's closed form picks for it (toward
        # the pole, or the nearest feasible swivel), moved only a little by the
        # polish (a swivel angle itself is ill-defined near a stretched elbow).
        pole = solver.model.shoulder + rng.normal(size=3)
        res, model_res = solver.solve(target, pole=pole), exact_model.solve(target, pole=pole)
        assert res.success, res.reason
        if np.min(np.abs(model_res.q[[1, 3, 5]])) >= 0.5:
            assert float(np.max(np.abs(res.q - model_res.q))) < 0.05, (res.q - model_res.q, mm)
    assert total > 0 and kept == total


@BACKENDS
@settings(max_examples=40, deadline=None)
@given(direction=st.tuples(*[st.floats(-1.0, 1.0)] * 3).filter(
           lambda d: np.linalg.norm(d) > 0.1),
       beyond=st.floats(1e-6, 2.0), angle=st.floats(-np.pi, np.pi),
       elbow=st.sampled_from([-1.0, 1.0]))
def test_motion_out_of_reach_aims_at_a_bent_elbow_on_its_own_side(backend, direction, beyond,
                                                                  angle, elbow):
    """aim_within_reach: beyond the reach, a pose with the wrist on the shoulder-wrist line.

    Checked independently: the wrist centre of the aimed pose is on the line
    from the shoulder to the target's wrist centre, at the distance the law of
    cosines gives for an elbow OUT_OF_REACH_BEND from straight; orientation
    kept; solved exactly, the elbow OUT_OF_REACH_BEND from straight. Within
    reach the pose is returned as is.
    """
    arm = ARMS[backend]
    m = arm.model
    u = np.array(direction) / np.linalg.norm(direction)
    target = np.eye(4)
    target[:3, :3] = rot.quaternion_to_matrix(rot.axis_angle_to_quaternion(u[[1, 2, 0]], angle))
    wrist = m.shoulder + (m.reach_high + beyond) * u
    target[:3, 3] = wrist - target[:3, :3] @ m.wrist_in_tip
    aimed = arm.aim_within_reach(target)
    l1, l2 = m.upper_arm, m.forearm
    bent = math.sqrt(l1 * l1 + l2 * l2 + 2.0 * l1 * l2 * math.cos(OUT_OF_REACH_BEND))
    aimed_wrist = aimed[:3, 3] + aimed[:3, :3] @ m.wrist_in_tip
    assert np.allclose(aimed[:3, :3], target[:3, :3], atol=0.0)
    assert np.allclose(aimed_wrist, m.shoulder + bent * u, atol=1e-12)
    reference = np.array([0.0, 0.5, 0.0, elbow * 1.2, 0.0, 0.9, 0.0])
    res = arm.solve(aimed, q_reference=reference)
    if not res.success:   # e.g. below the shoulder: the limits of q2 and q6 (the arm heads
        assert 'within the joint limits' in res.reason   # for the closest pose instead)
        assume(False)
    # Bent by OUT_OF_REACH_BEND (the iiwa is straight at q4 = 0). Which side the
    # nearest solution takes depends on the other joints too (above the shoulder,
    # q1 turning by pi); that a moving arm keeps its side is a tracker test.
    assert abs(res.q[3]) == pytest.approx(OUT_OF_REACH_BEND, abs=1e-9)
    inside = target.copy()
    inside[:3, 3] = m.shoulder + (m.reach_high - 1e-3) * u - target[:3, :3] @ m.wrist_in_tip
    assert arm.aim_within_reach(inside) is inside
