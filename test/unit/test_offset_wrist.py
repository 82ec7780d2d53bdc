# SPDX-License-Identifier: Apache-2.0

"""Closed-form IK of offset-wrist (Panda-class) arms: class, branches, q7 intervals, swivel."""

import math
from pathlib import Path

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node import Chain, InvalidInputError, JacobianIK, ModelError
from ik_node.core.ik.closed_form.base import BRANCHES
from ik_node.core.ik.closed_form.offset_wrist import AnalyticOffsetWrist
from ik_node.core.ik.closed_form.srs import AnalyticSRS
from ik_node.core.ik.factory import make_solver
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
import numpy as np
from oracle import forward, pose_errors
import pytest
from strategies import sweeping

ROOT = Path(__file__).resolve().parents[2]
FILES = {'panda': ('panda.urdf', 'panda_link0', 'tool0'),
         'xarm7': ('xarm7.urdf', 'link_base', 'tool0')}
TEXT = {name: (ROOT / 'urdf' / f).read_text() for name, (f, _, _) in FILES.items()}
CHAINS = {name: Chain.from_urdf_string(TEXT[name], base, tip)
          for name, (_, base, tip) in FILES.items()}
SOLVERS = {(name, backend): AnalyticOffsetWrist.from_chain(chain, backend=backend)
           for name, chain in CHAINS.items() for backend in ('numpy', 'numba')}
CASES = pytest.mark.parametrize('name, backend', sorted(SOLVERS))
# The interpreted solver (numpy) is the compiled one's reference, and the twin
# test below checks they agree pose for pose: its own runs of the loops below
# draw a quarter of the poses (all of them in scripts/sweep.sh).
SHARE = {'numba': 1.0, 'numpy': 1.0 if sweeping() else 0.25}
EXACT = 1e-9  # the bound on residuals, m and rad
# The makers' published numbers (Franka modified DH; UFACTORY standard DH).
SHOULDER_HEIGHT = {'panda': 0.333, 'xarm7': 0.267}
UPPER_ARM = {'panda': math.hypot(0.316, 0.0825), 'xarm7': math.hypot(0.293, 0.0525)}
FOREARM = {'panda': math.hypot(0.384, 0.0825), 'xarm7': math.hypot(0.3425, 0.0775)}
OFFSET7 = {'panda': 0.088, 'xarm7': 0.076}


def q_strategy(name):
    """Joints within limits; singular values (q2 = 0, q5 = +-pi/2, q6 = 0) and limits mixed in.

    A solution exactly at a limit is computed a few 1e-14 rad beyond it:
    the solver must put it on the limit, not drop it (a sweep's failure).
    """
    chain = CHAINS[name]
    lo, hi = chain.lower, chain.upper

    def joint(j, special):
        inside = [v for v in special if lo[j] <= v <= hi[j]] + [float(lo[j]), float(hi[j])]
        uniform = st.floats(float(lo[j]), float(hi[j]), allow_nan=False)
        return st.one_of(uniform, st.sampled_from(inside)) if inside else uniform

    specials = {1: (0.0, 1e-9), 4: (math.pi / 2, -math.pi / 2, 0.0), 5: (0.0, 1e-9)}
    return st.tuples(*(joint(j, specials.get(j, ())) for j in range(7))).map(np.array)


def swivel(chain, q, shoulder, point=None):
    """Return the elbow's swivel angle by this test's own geometry (the chain's FK frames).

    The elbow point is where the shoulder projects onto axis 4; the wrist
    point where axes 5 and 6 meet; psi = 0 on the side of the first joint's
    axis (z), as the solver's docstring defines it. With ``point`` (3,): that
    point's angle about the same shoulder-wrist line instead.
    """
    frames = np.array(chain.frames(np.asarray(q, float).tolist())[0])
    axis = [frames[j, :9].reshape(3, 3) @ chain._axis[j] for j in range(7)]
    o4, o5, o6 = frames[3, 9:], frames[4, 9:], frames[5, 9:]
    elbow = o4 + np.dot(shoulder - o4, axis[3]) * axis[3]
    # Closest point of axis 6 to axis 5 (they meet).
    n = np.cross(axis[4], axis[5])
    t = np.dot(o5 - o6, np.cross(axis[4], n)) / np.dot(axis[5], np.cross(axis[4], n))
    wrist = o6 + t * axis[5]
    u = (wrist - shoulder) / np.linalg.norm(wrist - shoulder)
    e1 = np.array([0.0, 0.0, 1.0]) - u[2] * u
    e1 /= np.linalg.norm(e1)
    v = (elbow if point is None else point) - shoulder
    return math.atan2(np.dot(v, np.cross(u, e1)), np.dot(v, e1))


def stretch_distance(solver, q):
    """Joint-4 distance (rad) from the stretched elbow (where the swivel is undefined)."""
    m = solver.model.arm
    a, b = m.elbow0 - m.shoulder, m.wrist0 - m.elbow0
    phase = math.atan2(a @ np.cross(m.axes[3], b), a @ b)
    return abs((q[3] - phase + math.pi) % (2 * math.pi) - math.pi)


def smallest_singular_value(chain, q, h=1e-6):
    """Smallest singular value of the tip's (6, 6) Jacobian in joints 1-6, by the oracle's FK.

    Central differences of the independent forward kinematics (oracle): the
    tip's velocity (m/rad) and angular velocity (rad/rad), base frame.
    """
    columns = []
    for j in range(6):
        step = np.zeros(len(q))
        step[j] = h
        ahead, behind = forward(chain, q + step), forward(chain, q - step)
        spin = ahead[:3, :3] @ behind[:3, :3].T
        angular = np.array([spin[2, 1] - spin[1, 2], spin[0, 2] - spin[2, 0],
                            spin[1, 0] - spin[0, 1]]) / 2.0
        columns.append(np.concatenate([ahead[:3, 3] - behind[:3, 3], angular]) / (2 * h))
    return float(np.linalg.svd(np.array(columns).T, compute_uv=False)[-1])


def poses(backend, n):
    """Return how many random poses a loop of ``n`` draws for ``backend`` (SHARE)."""
    return max(2, round(n * SHARE[backend]))


def wrap(angle):
    """Angle(s) wrapped into [-pi, pi)."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


# -- the class ---------------------------------------------------------------------------

@pytest.mark.parametrize('name', sorted(CHAINS))
def test_the_geometry_is_read_from_the_axes(name):
    model = SOLVERS[(name, 'numpy')].model
    np.testing.assert_allclose(model.arm.shoulder, [0, 0, SHOULDER_HEIGHT[name]], atol=1e-12)
    assert model.arm.upper_arm == pytest.approx(UPPER_ARM[name], abs=1e-12)
    assert model.arm.forearm == pytest.approx(FOREARM[name], abs=1e-12)
    assert model.offset7 == pytest.approx(OFFSET7[name], abs=1e-12)


@pytest.mark.parametrize('edit, pattern', [
    (('<origin xyz="0 -0.316 0"', '<origin xyz="0.003 -0.316 0"'),
     r'axes of joints 1-3 \(shoulder\) miss each other by 0.003 m'),
    (('<origin xyz="0 0 0" rpy="1.5707963267948966 0 0"/>\n    <axis xyz="0 0 1"/>\n'
      '    <limit lower="-0.0175"',
      '<origin xyz="0.005 0 0" rpy="1.5707963267948966 0 0"/>\n    <axis xyz="0 0 1"/>\n'
      '    <limit lower="-0.0175"'),
     r'axes of joints 5-6 \(wrist\) miss each other by 0.005 m'),
    (('<origin xyz="0.0825 0 0"', '<origin xyz="0.0825 0.004 0"'),
     r'project onto the elbow axis \(joint 4\) 0.004 m apart'),
    (('<origin xyz="0.088 0 0"', '<origin xyz="0 0 0"'),
     r'axis 7 passes through the wrist point \(an SRS arm\)'),
])
def test_chains_outside_the_class_are_refused_with_the_reason(edit, pattern):
    text = TEXT['panda']
    assert edit[0] in text
    chain = Chain.from_urdf_string(text.replace(edit[0], edit[1], 1), 'panda_link0', 'tool0')
    with pytest.raises(ModelError, match=pattern):
        AnalyticOffsetWrist.from_chain(chain)


def test_auto_picks_the_closed_form_of_each_bundled_arm():
    for name, chain in CHAINS.items():
        solver = make_solver(chain)
        assert isinstance(solver, AnalyticOffsetWrist), name
        assert 'offset-wrist' in solver.model_note
    iiwa = Chain.from_urdf_file(str(ROOT / 'urdf' / 'iiwa14.urdf'), 'iiwa_link_0', 'tool0')
    assert isinstance(make_solver(iiwa), AnalyticSRS)
    ur5e = Chain.from_urdf_file(str(ROOT / 'urdf' / 'ur5e.urdf'), 'base_link', 'tool0')
    solver = make_solver(ur5e)
    assert isinstance(solver, JacobianIK)
    assert 'not an SRS arm' in solver.model_note and 'offset-wrist' in solver.model_note
    with pytest.raises(ModelError, match='6 free joints'):
        make_solver(ur5e, 'analytic')


# -- every branch at a given q7 ----------------------------------------------------------

@CASES
@settings(max_examples=60)
@given(data=st.data())
def test_every_solution_at_q7_is_exact_and_the_pose_own_is_among_them(name, backend, data):
    """FK-built targets (independent FK), singular joints and limits mixed in.

    One double coincidence is exempt from "q's own branch is found at q7": a
    singular configuration (sigma_min < 1e-6) with a joint on its limit. The
    split along the singular direction is computed ~1e-8 rad off q and lands
    beyond that limit (sweeps drew q2 = 1e-9 with q3 on its limit); there
    solve() with q7 free must reach the pose exactly instead.
    """
    chain, solver = CHAINS[name], SOLVERS[(name, backend)]
    q = data.draw(q_strategy(name))
    target = forward(chain, q)
    solutions = solver.solve_all(target, q[6])
    sigma = smallest_singular_value(chain, q)
    exempt = sigma < 1e-6 and np.min(np.minimum(q - chain.lower, chain.upper - q)) < 1e-6
    if exempt:
        res = solver.solve(target, q_reference=q)
        assert res.success and chain.within_limits(res.q), res.reason
        assert max(pose_errors(chain, res.q, target)) <= EXACT
    else:
        assert solutions
    for s in solutions:
        assert max(pose_errors(chain, s, target)) <= EXACT
        assert s[6] == q[6] and chain.within_limits(s)
    if exempt:
        return
    # The configuration is unique on its branch (up to 2 pi where a joint's
    # range is wider than 2 pi): a solution whose pose is within EXACT of q's
    # (both components) is within 2 EXACT / sigma_min of q to first order,
    # sigma_min of joints 1-6's Jacobian (q7 is given). 1e-6 rad wherever
    # sigma_min >= 2e-3 (~95 % of uniform draws); looser toward singular
    # configurations (q2 = 0, the stretched elbow, q5 = pi/2 with q6 = 0),
    # which have a curve of exact solutions through q: seed 3006454358 drew
    # one, 2.3e-6 rad along it with sigma_min ~1e-11.
    bound = math.inf if sigma == 0.0 else max(1e-6, 2 * EXACT / sigma)
    assert min(np.max(np.abs(wrap(s - q))) for s in solutions) < bound


@CASES
def test_solve_with_q7_from_the_pose_reaches_every_random_pose(name, backend):
    chain, solver = CHAINS[name], SOLVERS[(name, backend)]
    rng = np.random.default_rng(5)
    for q in rng.uniform(chain.lower, chain.upper, size=(300, 7)):
        target = forward(chain, q)
        res = solver.solve(target, q7=q[6])
        assert res.success, res.reason
        assert res.q[6] == q[6] and chain.within_limits(res.q)
        assert max(pose_errors(chain, res.q, target)) <= EXACT
        batch, valid = solver.solve_batch(target[None], q[6], solver.branch_of(q))
        assert valid[0] and np.max(np.abs(wrap(batch[0] - q))) < 1e-6


@CASES
def test_a_reference_keeps_its_branch_along_a_path_through_singular_joints(name, backend):
    """Continuous targets from a joint path crossing q2 = 0 and q5 = pi/2 (roots meet)."""
    chain, solver = CHAINS[name], SOLVERS[(name, backend)]
    rng = np.random.default_rng(11)
    for _ in range(4):
        start = rng.uniform(0.6 * chain.lower + 0.4 * chain.upper,
                            0.4 * chain.lower + 0.6 * chain.upper)
        # q5 crosses pi / 2 at t = 0.25, q2 crosses 0 at t = 0.5 (each alone: where
        # both meet, the shoulder split is ill-conditioned, ~1e-8 rad of q2 from
        # the fold's square root, any q1 - q3 split within 1e-8 m of the pose).
        start[1], start[4] = -0.3, math.pi / 2 - 0.15
        velocity = rng.uniform(-0.2, 0.2, 7)
        velocity[1], velocity[4] = 0.6, 0.6   # q2 crosses 0, q5 crosses pi / 2
        velocity[6] = 0.0   # a reference keeps its q7 (the free parameter)
        path = [start + velocity * t for t in np.linspace(0.0, 1.0, 201)]
        q = path[0]
        for expected in path[1:]:
            res = solver.solve(forward(chain, expected), q_reference=q)
            assert res.success, res.reason
            assert np.max(np.abs(res.q - q)) < 0.05   # no branch flip
            q = res.q
            assert max(pose_errors(chain, q, forward(chain, expected))) <= EXACT
            if abs(expected[1]) > 1e-6:   # at q2 = 0 only q1 + q3 is defined
                assert np.max(np.abs(q - expected)) < 1e-6


# -- joint limits: feasible q7 intervals -------------------------------------------------

@CASES
def test_feasible_q7_intervals_agree_with_the_solutions(name, backend):
    chain, solver = CHAINS[name], SOLVERS[(name, backend)]
    rng = np.random.default_rng(7)
    for q in rng.uniform(chain.lower, chain.upper, size=(poses(backend, 25), 7)):
        target = forward(chain, q)
        branch = solver.branch_of(q)
        intervals = solver.feasible_q7(target, branch)
        assert any(lo - 1e-9 <= q[6] <= hi + 1e-9 for lo, hi in intervals)
        samples = rng.uniform(chain.lower[6], chain.upper[6], 40)
        edges = [v for iv in intervals for v in iv]
        _, valid = solver.solve_batch(np.broadcast_to(target, (40 + len(edges), 4, 4)),
                                      np.concatenate((samples, edges)), branch)
        for q7, ok in zip(samples, valid):
            inside = any(lo <= q7 <= hi for lo, hi in intervals)
            near_edge = any(abs(q7 - e) < 1e-6 for e in edges)
            assert ok == inside or near_edge, (q7, intervals)
        assert np.all(valid[40:])   # the edges themselves are feasible


@CASES
def test_an_infeasible_reference_q7_moves_to_a_near_feasible_value(name, backend):
    """q7 moves (documented: coarse grid, joint-nearest, then toward the reference's q7)."""
    chain, solver = CHAINS[name], SOLVERS[(name, backend)]
    rng = np.random.default_rng(8)
    span = chain.upper[6] - chain.lower[6]
    fine = np.linspace(chain.lower[6], chain.upper[6], 1201)
    moved, wanted = 0, poses(backend, 8)
    for q in rng.uniform(chain.lower, chain.upper, size=(60, 7)):
        target = forward(chain, q)
        ref = q.copy()
        ref[6] = rng.uniform(chain.lower[6], chain.upper[6])
        if solver.solve_all(target, ref[6]):
            assert solver.solve(target, q_reference=ref).q[6] == ref[6]
            continue   # some branch reaches the pose at the reference's q7
        res = solver.solve(target, q_reference=ref)
        assert res.success, res.reason
        assert max(pose_errors(chain, res.q, target)) <= EXACT and chain.within_limits(res.q)
        # Feasible q7 by brute force (every branch, a fine grid): the answer is
        # no farther from the reference's q7 than the coarse search's reach
        # (its first ring with a solution: 4 steps of span / 32) beyond the nearest.
        valid = np.zeros(len(fine), bool)
        for branch in BRANCHES:
            valid |= solver.solve_batch(np.broadcast_to(target, (len(fine), 4, 4)), fine,
                                        branch)[1]
        nearest = np.min(np.abs(fine[valid] - ref[6]))
        assert abs(res.q[6] - ref[6]) <= nearest + 5 * span / 32
        moved += 1
        if moved == wanted:
            break
    assert moved == wanted


# -- the swivel parameter and the pole ---------------------------------------------------

@CASES
def test_a_wanted_swivel_is_met_and_a_pole_turns_the_elbow(name, backend):
    chain, solver = CHAINS[name], SOLVERS[(name, backend)]
    shoulder = np.array([0.0, 0.0, SHOULDER_HEIGHT[name]])
    rng = np.random.default_rng(9)
    checked, drawn = 0, poses(backend, 80)
    for q in rng.uniform(chain.lower, chain.upper, size=(drawn, 7)):
        if stretch_distance(solver, q) < 0.3:
            continue   # near a stretched elbow the swivel is ill-defined
        target = forward(chain, q)
        psi = swivel(chain, q, shoulder)
        assert solver.swivel_of(q) == pytest.approx(psi, abs=1e-9)
        res = solver.solve(target, swivel=psi)
        assert res.success, res.reason
        assert max(pose_errors(chain, res.q, target)) <= EXACT
        assert abs(wrap(swivel(chain, res.q, shoulder) - psi)) < 1e-6
        # A pole a metre out from the shoulder toward q's elbow: the elbow of the
        # answer (at whatever q7) faces it about its own shoulder-wrist line.
        elbow_dir = np.array(chain.frames(q.tolist())[0][3][9:]) - shoulder
        pole = shoulder + elbow_dir / np.linalg.norm(elbow_dir)
        res = solver.solve(target, pole=pole)
        assert res.success, res.reason
        assert max(pose_errors(chain, res.q, target)) <= EXACT
        assert abs(wrap(swivel(chain, res.q, shoulder) -
                        swivel(chain, res.q, shoulder, pole))) < 1e-6
        checked += 1
    assert checked >= drawn // 4


# -- out of reach and bad input ----------------------------------------------------------

@CASES
def test_out_of_reach_is_reported_with_a_finite_configuration_within_limits(name, backend):
    chain, solver = CHAINS[name], SOLVERS[(name, backend)]
    target = np.eye(4)
    target[:3, 3] = [1.5, 0.2, 0.4]
    for kwargs in ({}, {'q7': 0.3}, {'swivel': 1.0}, {'q_reference': chain.mid_limits()}):
        res = solver.solve(target, **kwargs)
        assert not res.success and res.reason
        assert np.all(np.isfinite(res.q)) and chain.within_limits(res.q)
    assert 'out of reach' in solver.solve(target).reason
    assert solver.solve_all(target, 0.0) == []
    assert solver.feasible_q7(target, (1, 1, 1)) == []


def test_bad_input_is_refused_with_the_reason():
    solver = SOLVERS[('panda', 'numpy')]
    target = forward(CHAINS['panda'], CHAINS['panda'].mid_limits())
    with pytest.raises(InvalidInputError, match='q7'):
        solver.solve(target, q7=float('nan'))
    with pytest.raises(InvalidInputError, match='branch'):
        solver.feasible_q7(target, (1, 0, 1))
    with pytest.raises(InvalidInputError, match='pole'):
        solver.solve(target, pole=[0.0, float('inf'), 0.0])
    with pytest.raises(InvalidInputError):
        solver.solve(np.full((4, 4), np.nan))
    with pytest.raises(InvalidInputError, match='finite'):
        solver.solve_batch(target[None], float('nan'), (1, 1, 1))


# -- the compiled twin -------------------------------------------------------------------

@pytest.mark.parametrize('name', sorted(CHAINS))
def test_the_compiled_twin_equals_the_interpreted_reference(name):
    chain = CHAINS[name]
    numpy_solver, numba_solver = SOLVERS[(name, 'numpy')], SOLVERS[(name, 'numba')]
    rng = np.random.default_rng(13)
    for q in rng.uniform(chain.lower, chain.upper, size=(20, 7)):
        target = forward(chain, q)
        for kwargs in ({'q7': q[6] + 0.1}, {'swivel': 0.7}, {}, {'q_reference': q}):
            a, b = numpy_solver.solve(target, **kwargs), numba_solver.solve(target, **kwargs)
            assert a.success == b.success
            np.testing.assert_allclose(a.q, b.q, atol=1e-9)
        branch = numpy_solver.branch_of(q)
        assert numba_solver.branch_of(q) == branch
        np.testing.assert_allclose(numpy_solver.feasible_q7(target, branch),
                                   numba_solver.feasible_q7(target, branch), atol=1e-9)


# -- in the motion tracker (what the node runs) -----------------------------------------

@pytest.mark.parametrize('name', sorted(CHAINS))
def test_the_tracker_reaches_targets_and_turns_the_elbow_to_a_pole(name):
    """Run the motion tracker on the node's 'auto' solver, a pole at the end.

    Every command within the limits (speed, acceleration, position), targets
    reached, the elbow facing the pole.
    """
    from tracking import Judge
    chain = CHAINS[name]
    solver = make_solver(chain)
    assert isinstance(solver, AnalyticOffsetWrist) and solver.uses_pole
    shoulder = np.array([0.0, 0.0, SHOULDER_HEIGHT[name]])
    mid = chain.mid_limits()
    lo, hi = np.maximum(chain.lower, mid - 0.6), np.minimum(chain.upper, mid + 0.6)
    tracker = MotionTracker(chain, solver, TrackerConfig(), mid, 0.0)
    judge = Judge(tracker)
    rng = np.random.default_rng(21)
    t = 0.0
    for k in range(3):
        q = rng.uniform(lo, hi)
        target = forward(chain, q)
        tracker.add_target(t, target)
        if k == 2:   # a pole near q's own elbow direction, turned a little
            elbow = np.array(chain.frames(q.tolist())[0][3][9:]) - shoulder
            pole = shoulder + elbow / np.linalg.norm(elbow) + np.array([0.15, -0.15, 0.0])
            tracker.set_pole(pole)
        for _ in range(1000):
            t += 0.01
            judge(tracker.command(t))
        assert max(pose_errors(chain, tracker.q, target)) <= 1e-6
    assert abs(wrap(swivel(chain, tracker.q, shoulder) -
                    swivel(chain, tracker.q, shoulder, pole))) < 1e-3


def test_a_continuous_joint_7_is_searched_over_one_turn():
    text = TEXT['panda'].replace(
        '<joint name="panda_joint7" type="revolute">', '<joint name="panda_joint7" '
        'type="continuous">', 1)
    assert text != TEXT['panda']
    chain = Chain.from_urdf_string(text, 'panda_link0', 'tool0')
    assert not np.isfinite(chain.upper[6])
    solver = AnalyticOffsetWrist.from_chain(chain, backend='numpy')
    rng = np.random.default_rng(4)
    for q in rng.uniform(CHAINS['panda'].lower, CHAINS['panda'].upper, size=(10, 7)):
        target = forward(chain, q)
        for res in (solver.solve(target), solver.solve(target, q7=q[6] + 2 * math.pi),
                    solver.solve(target, swivel=solver.swivel_of(q))):
            assert res.success, res.reason
            assert max(pose_errors(chain, res.q, target)) <= EXACT
            assert np.all(np.isfinite(res.q))
