# SPDX-License-Identifier: Apache-2.0

"""Collision-aware motion without ROS: the margin holds at the hardware's rate, in every mode.

Each bundled arm among 0, 5 or 20 random obstacles (boxes, spheres, a wall),
driven through the tracker and the jerk-limited command stream at 250 Hz:
targets that are reachable and free, targets inside an obstacle, targets
into the arm itself, a twist aimed at an obstacle, a reset. The committed
command is sampled at 1 kHz (a controller's rate: cubic between grid
points, as a joint_trajectory_controller plays it). What must hold:

* every sample keeps every checked pair at least ``margin - 1 mm`` apart:
  computed by the model for every sample, and certified by the test oracle
  (geometry_oracle: closed forms and branch and bound, the oracle's own FK)
  at the closest samples of each run;
* every command keeps the joint limits (tracking.Judge);
* a reachable target whose solution is free is reached, or the guard names
  the blocking pair.
"""


import time

from geometry_oracle import distance_interval, RobotSolids
from guarded_run import arm_model, HOME_CLEARANCE, MARGIN, PERIOD, Run, SLACK
from hypothesis import event, given, HealthCheck, settings
from hypothesis import strategies as st
from models import ARMS, HOME
import numpy as np
from oracle import RawModel
import pytest
from strategies import examples, sweeping

coal = pytest.importorskip('coal', reason='coal is not installed: collision is off without it')

from ik_node.bench.collision import random_obstacles  # noqa: E402,I100
from ik_node.core.collision.guard import CollisionGuard  # noqa: E402
from ik_node.core.collision.shapes import checked_shape  # noqa: E402
from ik_node.core.ik.factory import make_solver  # noqa: E402
from ik_node.core.motion.arrival import Verdict  # noqa: E402

# Each arm with one obstacle count per run (every arm, every count in the sweep:
# scripts/sweep.sh, IK_NODE_SWEEPS=1): the stratified few of a CI run.
CASES = ([(arm, count) for arm in sorted(ARMS) for count in (0, 5, 20)] if sweeping() else
         [('iiwa14', 20), ('panda', 5), ('ur5e', 0), ('xarm7', 20)])


@pytest.mark.parametrize('arm, count', CASES)
@settings(max_examples=examples(1), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 16), smoothing=st.booleans())
def test_targets_and_twists_among_obstacles_keep_the_margin_at_the_hardware_rate(
        arm, count, seed, smoothing):
    chain, xml, model = arm_model(arm)
    rng = np.random.default_rng(seed)
    q0 = np.array(HOME[arm])
    obstacles = random_obstacles(model, q0, rng, count, HOME_CLEARANCE)
    try:
        run = Run(arm, model, chain, q0, smoothing)
        tip = chain.forward(q0)
        # 1. A reachable target whose solution is free: reached, or the pair named.
        q_goal = np.clip(q0 + rng.uniform(-0.6, 0.6, chain.n), chain.lower, chain.upper)
        free = model.distances(q_goal, MARGIN + 0.005).pairs.size == 0
        goal = chain.forward(q_goal)
        run.session.target(run.now, goal)
        run.go(8.0, until=lambda: np.all(run.tracker.v == 0.0) and run.stream.at_rest())
        if free:
            err = np.linalg.norm(chain.forward(run.tracker.q)[:3, 3] - goal[:3, 3])
            assert err < 1e-3 or run.blocked is not None, err
        # 2. A target inside an obstacle (or, with none, into the arm's own base).
        inside = tip.copy()
        inside[:3, 3] = (next(iter(obstacles.values()))[0].pose[:3, 3] if obstacles else
                         [0.05, 0.0, 0.15])
        run.session.target(run.now, inside)
        run.go(3.0)
        # 3. A twist at 0.2 m/s toward the base, 2 s (twists every 20 ms).
        for _ in range(100):
            here = chain.forward(run.tracker.q)[:3, 3]
            toward = -here / max(np.linalg.norm(here), 1e-9)
            run.session.twist(run.now, 0.2 * toward, np.zeros(3))
            run.go(0.02)
        run.go(0.5)
        # 4. A reset to the initial joints.
        run.session.reset(run.now)
        run.go(4.0, until=lambda: np.all(run.tracker.v == 0.0) and run.stream.at_rest())
        run.certify(xml)
    finally:
        model.set_obstacles({})


@pytest.mark.parametrize('arm', sorted(ARMS))
def test_an_arm_started_in_contact_backs_out_and_then_keeps_the_margin(arm):
    chain, xml, model = arm_model(arm)
    q0 = np.array(HOME[arm])
    tip = chain.forward(q0)[:3, 3]
    ball = checked_shape('sphere', (0.06,), np.eye(4), source='ball')
    pose = np.eye(4)
    pose[:3, 3] = tip
    model.set_obstacles({'ball': (checked_shape('sphere', (0.06,), pose, source='ball'),)})
    try:
        assert model.distances(q0, 0.0).pairs.size > 0   # in contact at the start
        run = Run(arm, model, chain, q0, True)
        # The target: the start pose 0.3 m up, behind nothing.
        goal = chain.forward(q0)
        goal[2, 3] += 0.3
        run.session.target(0.0, goal)
        lowest = []
        end = 6.0
        while run.now < end:
            run.now += PERIOD
            run.session.tick(run.now)
            q, _, _ = run.stream.sample(run.now)
            near = model.distances(q, 0.2)   # beyond 0.2 m: counted as 0.2
            lowest.append(min([0.2] + [d for p, d in zip(near.pairs, near.distance)
                                       if model.pair_names(int(p))[1] == 'ball']))
        lowest = np.array(lowest)
        assert lowest[0] < 0.0 and lowest[-1] >= MARGIN - SLACK   # out, and it stays out
        first_out = int(np.argmax(lowest >= MARGIN))
        assert np.all(lowest[first_out:] >= MARGIN - SLACK)
        # Never deeper than where it started (it only moved out).
        assert np.all(lowest >= lowest[0] - 1e-6)
        del ball
    finally:
        model.set_obstacles({})


def test_an_arm_held_at_an_obstacle_is_reported_held_at_every_tick_until_it_is_let_go():
    """While a target stays behind a wall the hold is reported at every tick (no flicker).

    Issue 50: the arm held comes to rest (no humming at the margin), and the
    status still names what holds it; let go, it says the arm has arrived.
    """
    chain, xml, model = arm_model('iiwa14')
    q0 = np.array(HOME['iiwa14'])
    start = chain.forward(q0)
    wall = np.eye(4)
    wall[:3, 3] = start[:3, 3] + [0.08, 0.0, 0.0]
    model.set_obstacles({'wall': (checked_shape('box', (0.05, 1.0, 1.0), wall, source='wall'),)})
    try:
        run = Run('iiwa14', model, chain, q0, True)
        behind = start.copy()
        behind[:3, 3] += [0.2, 0.0, -0.2]   # reachable, 12 cm beyond the wall's centre plane
        run.session.target(0.0, behind)
        run.go(4.0, until=lambda: run.blocked is not None)
        assert run.blocked is not None and 'wall' in run.blocked.pair
        run.go(2.0)   # at the margin by now, still pushed toward the wall
        for _ in range(250):
            run.go(PERIOD)
            # Blocked: the target is reachable only inside the wall.
            arrival = run.session.arrival(run.now)
            assert not arrival.verdict.ok and 'wall' in arrival.reason, arrival
        assert not np.any(run.tracker.v)   # at rest, not humming at the margin
        # Let go: a target 2 cm back from where the tip rests (where it rests is
        # at the margin: a target there is in collision, by 10 um).
        back = chain.forward(run.tracker.q)
        back[0, 3] -= 0.02
        run.session.target(run.now, back)
        run.go(6.0, until=lambda: run.session.arrival(run.now).verdict == Verdict.ARRIVED)
        assert run.session.arrival(run.now).verdict == Verdict.ARRIVED
        assert run.blocked is None
    finally:
        model.set_obstacles({})


# The links whose frames are an arm's shoulder, elbow and wrist centre.
ELBOW = {'iiwa14': ('iiwa_link_2', 'iiwa_link_4', 'iiwa_link_6')}


def ball_at(raw, base, link, values, radius):
    """Return a sphere obstacle (name, shapes) at a link's frame, placed by the oracle's FK."""
    pose = np.eye(4)
    pose[:3, 3] = raw.pose(base, link, values)[:3, 3]
    return {'ball': (checked_shape('sphere', (radius,), pose, source='ball'),)}


def ball_outside_the_elbow(raw, base, arm, values, radius):
    """Return a sphere obstacle whose surface passes through the elbow, on its outer side.

    Outer: away from the shoulder-wrist line (oracle FK), so that another
    swivel angle or the mirrored elbow clears it.
    """
    s, e, w = (raw.pose(base, link, values)[:3, 3] for link in ELBOW[arm])
    axis = (w - s) / np.linalg.norm(w - s)
    out = (e - s) - ((e - s) @ axis) * axis
    pose = np.eye(4)
    pose[:3, 3] = e + radius * out / np.linalg.norm(out)
    return {'ball': (checked_shape('sphere', (radius,), pose, source='ball'),)}


def oracle_clearance(xml, chain, model, q, raw):
    """Return the certified lowest distance (m) from the model's links to the ball at q."""
    solids = RobotSolids(xml, raw, chain.base_link, [b.link for b in model.bodies])
    values = dict(zip(chain.joint_names, q))
    (ball,) = model.obstacles['ball']
    lowest = np.inf
    for link in solids.solids:
        for solid in solids.posed(link, values):
            low, _ = distance_interval(solid, (ball.kind, ball.size, ball.pose), MARGIN)
            lowest = min(lowest, low)
    return lowest


# The iiwa14, with both ways of searching: the closed form's branches and
# swivel angles, and the Jacobian solver from other starting joints. (The
# other bundled arms' capsules keep their folded wrists or forearms inside the
# margin at every other solution of such poses: there is no free one to find.)
@pytest.mark.parametrize('arm, solver_name', [('iiwa14', 'analytic'), ('iiwa14', 'jacobian')])
def test_a_pose_whose_nearest_solution_hits_an_obstacle_is_solved_free_elsewhere(
        arm, solver_name):
    from ik_node.core.collision.free import FreeSolutions, SEARCH_BUDGET_S
    chain, xml, model = arm_model(arm)
    raw = RawModel(xml)
    q0 = np.array(HOME[arm])
    pose = chain.forward(q0)
    model.set_obstacles(ball_outside_the_elbow(raw, chain.base_link, arm,
                                               dict(zip(chain.joint_names, q0)), 0.06))
    try:
        solver = make_solver(chain, solver_name)
        solver.warm_up(q0)   # as the node does before its first tick
        nearest = solver.solve(pose, q0)
        assert nearest.success and oracle_clearance(xml, chain, model, nearest.q, raw) < 0.0
        # The closed form's search is bounded by a count; the Jacobian solver's
        # seeded solves by wall-clock time, given here as a loaded machine needs.
        budget = {'analytic': SEARCH_BUDGET_S, 'jacobian': 1.0}[solver_name]
        free = FreeSolutions(CollisionGuard(model, MARGIN), budget).prefer_free(
            solver, pose, q0, None, nearest)
        assert free.success and free.in_collision == ''
        # The pose by the oracle's FK, the clearance by the oracle's geometry.
        tip = raw.pose(chain.base_link, chain.tip_link, dict(zip(chain.joint_names, free.q)))
        np.testing.assert_allclose(tip, pose, atol=1e-5)
        assert oracle_clearance(xml, chain, model, free.q, raw) >= MARGIN - 1e-6
    finally:
        model.set_obstacles({})


def test_the_jacobian_answer_keeps_the_margin_by_moving_in_its_own_null_space(monkeypatch):
    """The margin as a constraint of the Jacobian solver's answer: no restart from elsewhere.

    The iiwa14's nearest solution puts its elbow into a ball; with the
    seeded restarts switched off, the answer is moved in the null space of
    the tip's Jacobian (the elbow swung off) and solved again: the pose by the
    oracle's FK, the margin by the oracle's geometry, and nearer the
    reference than the restarts' answer.
    """
    from ik_node.core.collision.free import FreeSolutions
    chain, xml, model = arm_model('iiwa14')
    raw = RawModel(xml)
    q0 = np.array(HOME['iiwa14'])
    pose = chain.forward(q0)
    model.set_obstacles(ball_outside_the_elbow(raw, chain.base_link, 'iiwa14',
                                               dict(zip(chain.joint_names, q0)), 0.06))
    try:
        solver = make_solver(chain, 'jacobian')
        solver.warm_up(q0)
        nearest = solver.solve(pose, q0)
        assert nearest.success and oracle_clearance(xml, chain, model, nearest.q, raw) < 0.0
        restarted = FreeSolutions(CollisionGuard(model, MARGIN), 1.0).restarted(
            solver, pose, q0, None, time.perf_counter())
        monkeypatch.setattr(FreeSolutions, 'restarted', lambda *args: None)
        # The walk's time, given as a loaded machine needs (its steps are counted too).
        free = FreeSolutions(CollisionGuard(model, MARGIN), repair_budget_s=5.0).prefer_free(
            solver, pose, q0, None, nearest)
        assert free.success and free.in_collision == ''
        tip = raw.pose(chain.base_link, chain.tip_link, dict(zip(chain.joint_names, free.q)))
        np.testing.assert_allclose(tip, pose, atol=1e-5)
        assert oracle_clearance(xml, chain, model, free.q, raw) >= MARGIN - 1e-6
        assert np.all((free.q >= chain.lower) & (free.q <= chain.upper))
        if restarted is not None:
            assert np.linalg.norm(free.q - q0) < np.linalg.norm(restarted - q0)
    finally:
        model.set_obstacles({})


@settings(max_examples=examples(6), deadline=None)
@given(offsets=st.lists(st.floats(-0.6, 0.6), min_size=7, max_size=7),
       radius=st.floats(0.03, 0.09))
def test_a_null_space_repair_reaches_the_pose_and_keeps_the_margin_or_gives_up(offsets, radius):
    """Whatever answer the null-space repair gives reaches the pose and keeps the margin.

    Random poses of the iiwa14 with a ball of random size on the outer side
    of the elbow; the Jacobian solver's answer repaired (or None).
    """
    from ik_node.core.collision.free import FreeSolutions
    chain, xml, model = arm_model('iiwa14')
    raw = RawModel(xml)
    q0 = np.clip(np.array(HOME['iiwa14']) + offsets, chain.lower, chain.upper)
    pose = chain.forward(q0)
    model.set_obstacles(ball_outside_the_elbow(raw, chain.base_link, 'iiwa14',
                                               dict(zip(chain.joint_names, q0)), radius))
    try:
        solver = make_solver(chain, 'jacobian')
        nearest = solver.solve(pose, q0)
        assert nearest.success
        repaired = FreeSolutions(CollisionGuard(model, MARGIN)).along_self_motion(
            solver, pose, nearest.q, None)
        event(f'repaired: {repaired is not None}')
        if repaired is not None:
            tip = raw.pose(chain.base_link, chain.tip_link, dict(zip(chain.joint_names, repaired)))
            np.testing.assert_allclose(tip, pose, atol=1e-5)
            assert oracle_clearance(xml, chain, model, repaired, raw) >= MARGIN - 1e-6
            assert np.all((repaired >= chain.lower) & (repaired <= chain.upper))
    finally:
        model.set_obstacles({})


@pytest.mark.parametrize('arm', ['iiwa14', 'ur5e'])
def test_a_pose_inside_an_obstacle_is_reachable_but_in_collision_and_names_the_pair(arm):
    from ik_node.core.collision.free import FreeSolutions
    chain, xml, model = arm_model(arm)
    raw = RawModel(xml)
    q0 = np.array(HOME[arm])
    pose = chain.forward(q0)
    model.set_obstacles(ball_at(raw, chain.base_link, chain.tip_link,
                                dict(zip(chain.joint_names, q0)), 0.03))
    try:
        solver = make_solver(chain, 'auto')
        solver.warm_up(q0)
        guard = CollisionGuard(model, MARGIN)
        free = FreeSolutions(guard)
        res = free.prefer_free(solver, pose, q0, None, solver.solve(pose, q0))
        assert res.success and res.in_collision.endswith(' with ball'), res.in_collision
        np.testing.assert_allclose(chain.forward(res.q), pose, atol=1e-6)
        # A held arm's next ticks (the measured joints jitter): no search again,
        # until the world changes.
        for jitter in (1e-6, -2e-6):
            again = free.prefer_free(solver, pose, q0 + jitter, None,
                                     solver.solve(pose, q0 + jitter))
            assert again.in_collision.endswith(' with ball')
        assert free.searches == 1
        guard.changed()
        free.prefer_free(solver, pose, q0, None, solver.solve(pose, q0))
        assert free.searches == 2
        # The world set again on the model alone (nothing tells the guard): searched again.
        model.set_obstacles(model.obstacles)
        free.prefer_free(solver, pose, q0, None, solver.solve(pose, q0))
        assert free.searches == 3
    finally:
        model.set_obstacles({})


def test_without_smoothing_the_arm_goes_to_the_free_solution_and_keeps_the_margin_on_the_way():
    chain, xml, model = arm_model('iiwa14')
    raw = RawModel(xml)
    q0 = np.array(HOME['iiwa14'])
    q_target = q0 + [0.3, 0.2, 0.0, 0.2, 0.0, -0.2, 0.0]
    pose = chain.forward(q_target)
    model.set_obstacles(ball_outside_the_elbow(raw, chain.base_link, 'iiwa14',
                                               dict(zip(chain.joint_names, q_target)), 0.06))
    try:
        run = Run('iiwa14', model, chain, q0, False)
        run.session.target(0.0, pose)
        run.go(10.0, until=lambda: np.all(run.tracker.v == 0.0) and run.stream.at_rest())
        q = run.tracker.q
        tip = raw.pose(chain.base_link, chain.tip_link, dict(zip(chain.joint_names, q)))
        assert np.linalg.norm(tip[:3, 3] - pose[:3, 3]) < 1e-3
        # The reachability check's answer, the goal from the first tick, is free.
        checked = run.tracker.status().target_result
        assert checked.success and checked.in_collision == ''
        assert oracle_clearance(xml, chain, model, checked.q, raw) >= MARGIN - 1e-6
        assert oracle_clearance(xml, chain, model, q, raw) >= MARGIN - SLACK
        run.certify(xml)
    finally:
        model.set_obstacles({})


def test_the_self_motion_bench_frees_elbows_the_restarts_free_too():
    """``ik_bench collision --self-motion`` on a few poses: its balls hit, and both ways free them.

    Its elbow ball (placed by the chain's own frames) touches the answer in
    every case drawn; the oracle-checked tests above pin what a freed answer is.
    """
    from ik_node.bench.collision import self_motion_comparison
    result = self_motion_comparison(seed=5, count=4)
    assert result['cases'] == 4
    assert result['freed_by_self_motion'] == 4 and result['freed_by_restarts'] == 4
    assert 0 <= result['self_motion_nearer'] <= 4
