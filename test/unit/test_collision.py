# SPDX-License-Identifier: Apache-2.0

"""Collision geometry: distances, witnesses, gradients and pair rules, against the test oracle.

Every distance the model answers is checked against geometry_oracle (closed
form point-to-solid distances, branch and bound over surfaces, the oracle's
own forward kinematics): not against coal or the code under test.
"""

import math

import collision_reference as numpy_ref
from geometry_oracle import distance_interval, point_distance, RobotSolids
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from models import ARMS, HOME, ROOT
import numpy as np
from oracle import RawModel
import pytest
from strategies import examples
import yaml

coal = pytest.importorskip('coal', reason='coal (PyPI: numpy >= 2; distro: ros-<distro>-coal) '
                                          'is not installed: collision is off without it')

from ik_node.core.collision.guard import CollisionGuard  # noqa: E402,I100
from ik_node.core.collision.model import CollisionModel  # noqa: E402
from ik_node.core.collision.pairs import never_checked  # noqa: E402
from ik_node.core.collision.shapes import checked_shape, CollisionError  # noqa: E402
from ik_node.core.model.chain import Chain  # noqa: E402
from ik_node.description.geometry import collision_model, link_tree, \
    obstacle_from_dict  # noqa: E402
from ik_node.description.urdf import link_frames  # noqa: E402

# Pairs closer than this (m) are compared with the oracle.
NEAR = 0.3
# Distances agree to this (m): coal's GJK/EPA tolerance and the oracle's bound.
TOL = 1e-5
# coal's answers for one rigid pair posed two ways differ by up to this (m): its
# GJK stops at a tolerance of 1e-6 (8e-7 m seen on the panda's links 1 and 3).
GJK_NOISE = 5e-6


def load(arm):
    """Return (chain, xml, model, raw oracle) of a bundled arm, its collision model built."""
    path, base, tip = ARMS[arm]
    xml = path.read_text()
    chain = Chain.from_urdf_string(xml, base, tip)
    model, _ = collision_model(xml, chain, home=HOME[arm])
    return chain, xml, model, RawModel(xml)


MODELS = {}


def arm_model(arm):
    """Return load(arm), cached (a model samples contacts when built: a few hundred ms)."""
    if arm not in MODELS:
        MODELS[arm] = load(arm)
    return MODELS[arm]


def q_within(chain, unit):
    """Return joints at fractions ``unit`` (n,) of each joint's range (one turn if unbounded)."""
    lower = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    upper = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    return lower + (upper - lower) * np.asarray(unit)


def oracle_solids(chain, xml, model, raw, q):
    """Return link -> [(kind, size, pose in the base frame)] posed by the oracle FK at q."""
    links = [b.link for b in model.bodies]
    solids = RobotSolids(xml, raw, chain.base_link, links)
    values = dict(zip(chain.joint_names, q))   # a mimic follows its leader in RawModel
    return {link: solids.posed(link, values) for link in solids.solids}


def moving_solids(chain, xml, model, raw, q):
    """Return oracle_solids at q without the solids no joint motion moves (in the oracle's FK).

    A sphere whose centre stays, a cylinder whose centre and axis stay (turned
    about its own axis), anything else whose pose stays, over seeded
    configurations: the model never pairs such a shape with an obstacle
    (nothing the arm does changes that distance).
    """
    rng = np.random.default_rng(7)
    lower = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    upper = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    others = [oracle_solids(chain, xml, model, raw, rng.uniform(lower, upper)) for _ in range(4)]
    here = oracle_solids(chain, xml, model, raw, q)

    def still(kind, pose, poses):
        if kind == 'sphere':
            return all(np.allclose(pose[:3, 3], p[:3, 3], atol=1e-9) for p in poses)
        if kind == 'cylinder':
            return all(np.allclose(pose[:3, 3], p[:3, 3], atol=1e-9)
                       and abs(abs(pose[:3, 2] @ p[:3, 2]) - 1.0) < 1e-12 for p in poses)
        return all(np.allclose(pose, p, atol=1e-9) for p in poses)

    return {link: [solid for k, solid in enumerate(shapes)
                   if not still(solid[0], solid[2], [o[link][k][2] for o in others])]
            for link, shapes in here.items()}


obstacle_kinds = st.sampled_from(['box', 'sphere', 'cylinder', 'halfspace'])


@st.composite
def obstacles(draw):
    """Draw a primitive within ~1 m of the base, random size and orientation (base frame)."""
    kind = draw(obstacle_kinds)
    size = {'box': 3, 'sphere': 1, 'cylinder': 2, 'halfspace': 0}[kind]
    dims = [draw(st.floats(0.02, 0.4)) for _ in range(size)]
    pos = [draw(st.floats(-0.9, 0.9)) for _ in range(3)]
    quat = np.array([draw(st.floats(-1, 1)) for _ in range(4)])
    if np.linalg.norm(quat) < 0.1:
        quat = np.array([0.0, 0.0, 0.0, 1.0])
    if kind == 'halfspace':   # a wall or floor out of the way of the base
        pos = list(np.array(pos) * 0.0 + np.array([0.0, 0.0, -0.05]))
    return {'name': 'o', 'shape': kind, 'size': dims, 'position': pos,
            'orientation': list(quat / np.linalg.norm(quat))}


def posed_obstacle(chain, xml, entry):
    """Return (name, Shape) of an obstacle entry in the base frame."""
    return obstacle_from_dict(entry, link_frames(xml, chain), chain)


@pytest.mark.parametrize('arm', sorted(ARMS))
@settings(max_examples=examples(4), deadline=None)
@given(unit=st.lists(st.floats(0.0, 1.0), min_size=7, max_size=7), entry=obstacles())
# A fresh-seed sweep: the ur5e's shoulder sphere (on the axes of joints 1 and 2: no joint
# moves it, never paired with an obstacle) was the closest solid to a ball in front of it.
@example(unit=[0.0] * 7, entry={'name': 'o', 'shape': 'sphere', 'size': [0.25],
                                'position': [0.5, 0.0, 0.0], 'orientation': [0.0, 0.0, 0.0, 1.0]})
def test_every_near_pair_distance_and_witness_matches_the_oracle(arm, unit, entry):
    chain, xml, model, raw = arm_model(arm)
    q = q_within(chain, unit[:chain.n])
    name, shape = posed_obstacle(chain, xml, entry)
    model.set_obstacles({name: (shape,)})
    try:
        near = model.distances(q, NEAR)
        solids = oracle_solids(chain, xml, model, raw, q)
        moving = moving_solids(chain, xml, model, raw, q)   # the ones paired with obstacles
        world = {name: [(shape.kind, shape.size, shape.pose)]}
        closest, axis = {}, {}
        for row, p in enumerate(near.pairs):
            a, b = model.pair_names(int(p))
            d = float(near.distance[row])
            if d < closest.get((a, b), math.inf):
                closest[(a, b)], axis[(a, b)] = d, near.normal[row]
            if d < 0.0:
                continue   # penetration: checked by test_contact_is_a_negative_distance
            # The witnesses lie on the two solids, the distance apart.
            assert abs(np.linalg.norm(near.point_b[row] - near.point_a[row]) - d) < TOL
            sa = solids[a] if a in solids else world[a]
            sb = solids[b] if b in solids else world[b]
            on_a = min(abs(point_distance(k, s, t, near.point_a[row][None])[0]) for k, s, t in sa)
            on_b = min(abs(point_distance(k, s, t, near.point_b[row][None])[0]) for k, s, t in sb)
            assert on_a < TOL and on_b < TOL, (a, b, on_a, on_b)
        # No two points of two checked links (or a link's moving shapes and the
        # obstacle) are closer than the closest of their shape pairs (certified
        # lower bound).
        for (a, b), d in closest.items():
            if d < 0.0 or d >= NEAR:   # beyond NEAR another shape pair may be closer
                continue
            sa = (moving if b in world else solids)[a] if a in solids else world[a]
            sb = solids[b] if b in solids else world[b]
            # The model's normal is tried as a separating axis (for a convex
            # hull: its projection gap is a lower bound, whatever its source).
            lowest = min(distance_interval(x, y, d - TOL, axis=axis[(a, b)])[0]
                         for x in sa for y in sb)
            assert lowest >= d - TOL, (a, b, d, lowest)
    finally:
        model.set_obstacles({})


@pytest.mark.parametrize('arm', sorted(ARMS))
@settings(max_examples=examples(4), deadline=None)
@given(unit=st.lists(st.floats(0.0, 1.0), min_size=7, max_size=7), entry=obstacles(),
       floor=st.floats(-0.5, 0.3), before=st.lists(st.floats(-0.2, 0.2), min_size=7, max_size=7),
       exact=st.floats(0.0, NEAR))
def test_the_compiled_kernels_answer_as_their_source_run_by_cpython_and_the_numpy_references(
        arm, unit, entry, floor, before, exact):
    """kernels.proximity compiled and run by CPython: same pairs, distances, witnesses, gradients.

    Both against the numpy references (collision_reference, written apart
    from the kernels' loops). Every pair's bound enters ``lowest``; a
    half-space (the floor, its height drawn) takes the plane branch. Pairs
    beyond ``exact`` get their spheres' answer; distances known at a
    configuration ``before`` (rad away) leave pairs out alike.
    """
    pytest.importorskip('numba', reason='numba is not installed: only the CPython run exists')
    chain, xml, model, _ = arm_model(arm)
    twin = CollisionModel(chain, model.bodies, model.disabled, backend='numpy')
    below = np.eye(4)
    below[2, 3] = floor
    world = {'thing': (posed_obstacle(chain, xml, entry)[1],),
             'floor': (checked_shape('halfspace', (), below, source='floor'),)}
    q = q_within(chain, unit[:chain.n])
    q_before = q + np.array(before[:chain.n])
    try:
        model.set_obstacles(world)
        twin.set_obstacles(world)
        then = model.distances(q_before, NEAR)
        known = np.full(len(model.pairs), -np.inf)
        known[then.pairs] = then.distance
        # The oracle's own sum: what the distances at q_before leave at q.
        floors = known - np.abs(q - q_before) @ model.sweep.T
        at = np.tile(q_before, (len(known), 1))
        compiled = np.empty(len(known))
        model.kernels.proximity.known_floors(q, known, at, model.sweep, np.zeros(len(known)),
                                             compiled)
        assert np.allclose(compiled, floors, rtol=0.0, atol=1e-12)
        assert np.allclose(numpy_ref.known_floors(q, known, at, model.sweep), floors, rtol=0.0,
                           atol=1e-12)
        ours = model.distances(q, NEAR, exact, floors)
        theirs = twin.distances(q, NEAR, exact, floors)
        fresh = model.distances(q, NEAR)   # nothing known: every pair is judged afresh
        # The broad phase: shape poses and every pair's bound, as the reference poses them.
        rot, pos, bound, centres = numpy_ref.posed_bounds(model, q)
        for which in (model, twin):
            got = which._broad_phase(q)
            assert np.allclose(got[0], rot, rtol=0.0, atol=1e-12)
            assert np.allclose(got[1], pos, rtol=0.0, atol=1e-12)
            assert np.allclose(got[2], bound, rtol=0.0, atol=1e-12)
        coarse = ours.pairs[~ours.exact]   # the spheres' witnesses, as the reference puts them
        for side, value in zip(('point_a', 'point_b', 'normal'),
                               numpy_ref.sphere_witnesses(model, coarse, centres)):
            assert np.allclose(getattr(ours, side)[~ours.exact], value, rtol=0.0, atol=1e-9)
        expected = numpy_ref.gradients(model, q, ours)
        assert np.allclose(model.gradients(q, ours), expected, rtol=0.0, atol=1e-12)
        assert np.allclose(twin.gradients(q, ours), expected, rtol=0.0, atol=1e-12)
        # The guard's one-call gradients and braking dips, against the references' two.
        v, a = np.linspace(-1.5, 1.0, chain.n), np.where(np.arange(chain.n) % 3, 5.0, np.inf)
        for which in (model, twin):
            grads, dip = which.gradients_and_dip(q, ours, v, a)
            assert np.allclose(grads, expected, rtol=0.0, atol=1e-12)
            assert np.allclose(dip, numpy_ref.braking_dip(expected, v, a), rtol=0.0,
                               atol=1e-12)
    finally:
        model.set_obstacles({})
    assert np.array_equal(ours.pairs, theirs.pairs)
    assert np.array_equal(ours.exact, theirs.exact)
    assert np.allclose(ours.floors, theirs.floors, rtol=0.0, atol=1e-9)
    assert np.allclose(ours.distance, theirs.distance, rtol=0.0, atol=1e-9)
    for side in ('point_a', 'point_b', 'normal'):   # coal's rows and the spheres' alike
        assert np.allclose(getattr(ours, side), getattr(theirs, side), rtol=0.0, atol=1e-9)
    # What is known only leaves out pairs that are not that near.
    row_of = {p: row for row, p in enumerate(ours.pairs.tolist())}
    for p, d in zip(fresh.pairs.tolist(), fresh.distance):
        if d < NEAR:
            row = row_of[p]
            # (a sphere bound is below a separation, and below 0 in contact)
            assert (ours.distance[row] == d if ours.exact[row]
                    else ours.distance[row] <= max(d, 0.0) + 1e-12)
    assert ours.lowest == pytest.approx(theirs.lowest, abs=1e-12)


def test_a_model_switched_between_backends_answers_the_same():
    """set_backend: the node's model starts on numpy (kernels not compiled yet), then numba.

    A model built on numpy and switched answers as one built on numba, and
    back (pairs, distances, gradients), at configurations drawn per arm. The
    numpy model has answered at those configurations before the switch (its
    frames cached in its own types: the node's case, a TypingError before).
    """
    pytest.importorskip('numba', reason='numba is not installed: only the numpy path exists')
    for arm in ('iiwa14', 'panda'):
        chain, _, model, _ = arm_model(arm)
        switched = CollisionModel(chain, model.bodies, model.disabled, backend='numpy')
        assert switched.backend == 'numpy' and model.backend == 'numba'
        drawn = np.random.default_rng(3).uniform(chain.lower, chain.upper, (3, chain.n))
        for q in drawn:
            switched.gradients(q, switched.distances(q, NEAR))
        switched.set_backend('numba')
        assert switched.backend == 'numba'
        for q in drawn:
            ours, theirs = switched.distances(q, NEAR), model.distances(q, NEAR)
            assert np.array_equal(ours.pairs, theirs.pairs)
            assert np.allclose(ours.distance, theirs.distance, rtol=0.0, atol=1e-9)
            assert np.allclose(switched.gradients(q, ours), model.gradients(q, theirs),
                               rtol=0.0, atol=1e-12)
        switched.set_backend('numpy')
        assert switched.backend == 'numpy'
        q = chain.mid_limits()
        assert np.allclose(switched.distances(q, NEAR).distance,
                           model.distances(q, NEAR).distance, rtol=0.0, atol=1e-9)


def test_contact_is_a_negative_distance():
    chain, xml, model, raw = arm_model('iiwa14')
    q = np.array(HOME['iiwa14'])
    tip = chain.forward(q)[:3, 3]
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.05],
                                              'position': list(tip)})
    model.set_obstacles({name: (shape,)})
    try:
        near = model.distances(q, 0.0)
        names = {model.pair_names(int(p)) for p in near.pairs}
        assert any('ball' in n for n in names)
        assert near.lowest < 0.0
    finally:
        model.set_obstacles({})


@pytest.mark.parametrize('arm', sorted(ARMS))
@settings(max_examples=examples(5), deadline=None)
@given(unit=st.lists(st.floats(0.05, 0.95), min_size=7, max_size=7),
       centre=st.lists(st.floats(-0.7, 0.7), min_size=3, max_size=3))
def test_distance_gradients_match_finite_differences(arm, unit, centre):
    chain, xml, model, raw = arm_model(arm)
    q = q_within(chain, unit[:chain.n])
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.1],
                                              'position': centre})
    model.set_obstacles({name: (shape,)})
    try:
        near = model.distances(q, 0.4)
        grads = model.gradients(q, near)
        h = 1e-6
        for row, p in enumerate(near.pairs):
            if near.distance[row] < 1e-3:
                continue
            names = model.pair_names(int(p))
            if 'ball' not in names:   # two cylinders: the nearest points may jump (edges)
                continue
            numeric = np.zeros(chain.n)
            for k in range(chain.n):
                e = np.zeros(chain.n)
                e[k] = h
                plus = _pair_distance(model, q + e, int(p))
                minus = _pair_distance(model, q - e, int(p))
                numeric[k] = (plus - minus) / (2 * h)
            np.testing.assert_allclose(grads[row], numeric, atol=1e-5, rtol=1e-4)
    finally:
        model.set_obstacles({})


def lowest_to(model, q, obstacle):
    """Return the smallest distance from the arm to one obstacle at q, m."""
    near = model.distances(q, math.inf)
    return min(d for p, d in zip(near.pairs, near.distance)
               if model.pair_names(int(p))[1] == obstacle)


def _pair_distance(model, q, pair):
    near = model.distances(q, math.inf)
    return float(near.distance[list(near.pairs).index(pair)])


def test_adjacent_and_rigid_links_are_never_checked_and_an_srdf_pair_is_not_either():
    chain, xml, model, _ = arm_model('panda')
    _, parents = link_tree(xml)
    checked = {frozenset(model.pair_names(k)) for k in range(len(model.pairs))}
    for a, b in never_checked(parents):
        assert frozenset((a, b)) not in checked
    # Links joined by one movable joint: panda_link3 hangs from panda_link2.
    assert frozenset(('panda_link2', 'panda_link3')) not in checked
    assert frozenset(('panda_link1', 'panda_link5')) in checked or \
        frozenset(('panda_link1', 'panda_link5')) in model.disabled
    fresh, _ = collision_model(xml, chain, disabled=[('panda_link1', 'panda_link6')],
                               sample_contacts=False)
    assert frozenset(('panda_link1', 'panda_link6')) not in {
        frozenset(fresh.pair_names(k)) for k in range(len(fresh.pairs))}
    with pytest.raises(CollisionError, match="'no_such_link'"):
        collision_model(xml, chain, disabled=[('panda_link1', 'no_such_link')],
                        sample_contacts=False)


def shape_index(model):
    """Return {(link, collision element index): the model's shape index} (``model.still``'s)."""
    index, s = {}, 0
    for body in model.bodies:
        for k in range(len(body.shapes)):
            index[(body.link, k)] = s
            s += 1
    return index


def test_a_shape_no_joint_moves_is_still_and_never_paired_with_an_obstacle():
    """The UR5e's shoulder shapes (on joint 1's axis) keep their distance to anything: unchecked.

    Still or not is judged by the oracle: each shape's distance to seeded
    balls at seeded joints, exact closed forms (issue 50: a sphere 55 mm
    inside the floor held the arm "in collision" in every configuration).
    """
    chain, xml, model, raw = arm_model('ur5e')
    rng = np.random.default_rng(5)
    qs = [q_within(chain, rng.uniform(size=chain.n)) for _ in range(6)]
    posed = [oracle_solids(chain, xml, model, raw, q) for q in qs]
    balls = rng.uniform([-0.6, -0.6, -0.3], [0.6, 0.6, 0.6], (4, 3))
    index = shape_index(model)
    still = {}
    for (link, k), s in index.items():
        spread = 0.0
        for centre in balls:
            d = [point_distance(*solids[link][k], centre[None])[0] for solids in posed]
            spread = max(spread, max(d) - min(d))
        still[s] = spread < 1e-9
    assert [still[s] for s in range(len(index))] == model.still.tolist()
    assert sum(still.values()) == 3   # the shoulder's cylinder and sphere, the upper arm's sphere
    floor = checked_shape('halfspace', (), np.eye(4), source='floor')
    model.set_obstacles({'floor': (floor,)})
    try:
        paired = {index[side] for k in range(len(model.pairs))
                  for side in model.pair_shapes(k) if side[0] != 'floor'
                  and 'floor' in model.pair_names(k)}
        assert paired == {s for s, moves in still.items() if not moves}
    finally:
        model.set_obstacles({})


def one_arm_configs():
    """Return the bundled configs of one end effector (several: test_collision_tree)."""
    return sorted(p.stem for p in (ROOT / 'config').glob('*.yaml')
                  if 'end_effectors' not in p.read_text())


@pytest.mark.parametrize('config', one_arm_configs())
def test_each_bundled_config_starts_outside_the_margin_on_its_floor(config):
    """The start pose of each config/<arm>.yaml keeps collision_margin to the floor and itself.

    The launch file adds config/obstacles/floor.yaml; distances are the
    oracle's (certified lower bounds), over every pair the model checks.
    """
    params = next(iter(yaml.safe_load((ROOT / 'config' / f'{config}.yaml').read_text())
                       .values()))['ros__parameters']
    chain, xml, model, raw = arm_model(config)
    q0 = np.array(params.get('initial_positions', chain.mid_limits()))
    margin = params['collision_margin']
    solids = oracle_solids(chain, xml, model, raw, q0)
    floor = ('halfspace', (), np.eye(4))
    pairs = {frozenset(model.pair_names(k)) for k in range(len(model.pairs))}
    for pair in sorted(pairs, key=sorted):
        a, b = sorted(pair)
        lowest = min(distance_interval(x, y, margin)[0] for x in solids[a] for y in solids[b])
        assert lowest >= margin, (config, a, b, lowest)
    index = shape_index(model)
    for (link, k), s in index.items():
        if not model.still[s]:
            assert distance_interval(solids[link][k], floor, margin)[0] >= margin, (config, link)


@pytest.mark.parametrize('entry, message', [
    ({'name': 'x', 'shape': 'box', 'size': [0.1, float('nan'), 0.1]}, 'not within'),
    ({'name': 'x', 'shape': 'box', 'size': [0.1, -0.2, 0.1]}, 'not within'),
    ({'name': 'x', 'shape': 'box', 'size': [0.1, 0.1]}, 'takes 3'),
    ({'name': 'x', 'shape': 'cone', 'size': [0.1]}, 'unknown shape'),
    ({'name': 'x', 'shape': 'sphere', 'size': [0.1], 'frame': 'nowhere'}, "'nowhere'"),
    ({'name': 'x', 'shape': 'sphere', 'size': [0.1], 'frame': 'iiwa_link_3'}, 'moves with'),
    ({'name': 'x', 'shape': 'sphere', 'size': [0.1], 'position': [0, 0]}, 'expected 3'),
    ({'name': 'x', 'shape': 'sphere', 'size': [0.1], 'orientation': [0, 0, 0, 0]}, 'zero norm'),
    ({'name': 'x', 'shape': 'mesh', 'mesh': '/no/such/file.stl'}, 'cannot read mesh'),
    ({'shape': 'sphere', 'size': [0.1]}, 'needs a name'),
    ({'name': 'x', 'shape': 'sphere', 'size': [0.1], 'colour': 'red'}, 'unknown field'),
])
def test_a_malformed_obstacle_is_refused_with_its_reason(entry, message):
    chain, xml, _, _ = arm_model('iiwa14')
    with pytest.raises(CollisionError, match=message):
        posed_obstacle(chain, xml, entry)


def test_a_flat_or_short_mesh_is_refused():
    with pytest.raises(CollisionError, match='flat'):
        checked_shape('mesh', (), vertices=[[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]])
    with pytest.raises(CollisionError, match='at least 4'):
        checked_shape('mesh', (), vertices=[[0, 0, 0], [1, 0, 0], [0, 1, 0]])


def test_the_guard_lets_an_arm_inside_the_margin_move_out_but_not_further_in():
    chain, xml, model, _ = arm_model('iiwa14')
    q = np.array(HOME['iiwa14'])
    tip = chain.forward(q)[:3, 3]
    margin = 0.02
    assert np.all(model.distances(q, margin).distance >= margin)   # nothing else inside it
    ball = {'name': 'ball', 'shape': 'sphere', 'size': [0.05], 'position': list(tip)}
    ball['position'][2] -= 0.05 + 0.065 * 0.75 + 0.01   # 1 cm under the tool's sphere
    name, shape = posed_obstacle(chain, xml, ball)
    model.set_obstacles({name: (shape,)})
    try:
        guard = CollisionGuard(model, margin)
        near = model.distances(q, margin)
        assert {model.pair_names(int(p))[1] for p, d in zip(near.pairs, near.distance)
                if d < margin} == {'ball'}
        assert abs(near.lowest - 0.01) < 1e-6
        grads = model.gradients(q, near)
        out = np.linalg.pinv(grads) @ np.ones(len(grads))   # every ball pair opens
        step = 1e-3 * out / np.linalg.norm(out)
        a, rest = np.full(chain.n, 10.0), np.zeros(chain.n)
        assert guard.admits(q, q + step, rest, a, chain.lower, chain.upper)      # out: free
        assert not guard.admits(q, q - step, rest, a, chain.lower, chain.upper)  # further in
    finally:
        model.set_obstacles({})


def test_the_stopping_point_keeps_the_margin_a_fast_approach_is_refused_early():
    chain, xml, model, _ = arm_model('iiwa14')
    q = np.array(HOME['iiwa14'])
    tip = chain.forward(q)[:3, 3]
    name, shape = posed_obstacle(chain, xml, {'name': 'wall', 'shape': 'box',
                                              'size': [0.05, 1.0, 1.0],
                                              'position': list(tip + [0.25, 0.0, 0.0])})
    model.set_obstacles({name: (shape,)})
    try:
        guard = CollisionGuard(model, 0.01)
        jac = chain.jacobian(q)[:3]
        toward = np.linalg.pinv(jac) @ np.array([1.0, 0.0, 0.0])   # tip along +x, 1 m/s
        a, dt = np.full(chain.n, 5.0), 0.004
        slow, fast = 0.05 * toward, 1.0 * toward
        # Slowly the stopping point is ~mm ahead: admitted; fast it is far
        # beyond the wall (v^2 / 2a per joint): refused while 0.2 m away.
        assert guard.admits(q, q + slow * dt, slow, a, chain.lower, chain.upper)
        assert not guard.admits(q, q + fast * dt, fast, a, chain.lower, chain.upper)
        assert lowest_to(model, q, 'wall') > 0.1
    finally:
        model.set_obstacles({})


def test_a_small_obstacle_between_a_free_stop_and_a_fast_arm_is_seen_on_the_way():
    """The braking path is judged, not only its ends: a ball it runs through refuses the step.

    Both ends (the proposed command and its stopping point) are far from
    the ball (more than 5 cm); the tip's braking path passes
    through it. (A fresh-seed sweep found the panda's wrist braking through
    such a ball at 2 rad/s: 8.5 mm inside a 10 mm margin, then in contact.)
    """
    chain, xml, model, _ = arm_model('iiwa14')
    q = np.array(HOME['iiwa14'])
    jac = chain.jacobian(q)[:3]
    v = np.linalg.pinv(jac) @ np.array([2.0, 0.0, 0.0])   # tip along +x at 2 m/s
    a, dt = np.full(chain.n, 5.0), 0.004
    q1 = q + v * dt
    stops = np.abs(v) / a
    t = 0.5 * stops.max()
    tt = np.minimum(t, stops)
    halfway = q1 + v * tt - 0.5 * np.sign(v) * a * tt * tt   # on the braking path
    stop = q1 + v * np.abs(v) / (2 * a)
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.02],
                                              'position': list(chain.forward(halfway)[:3, 3])})
    model.set_obstacles({name: (shape,)})
    try:
        assert lowest_to(model, halfway, 'ball') < 0.0          # in the way
        assert lowest_to(model, q1, 'ball') > 0.05              # both ends far from it
        assert lowest_to(model, stop, 'ball') > 0.05
        guard = CollisionGuard(model, 0.01)
        assert not guard.admits(q, q1, v, a, chain.lower, chain.upper)
        slow = 0.02 * v   # a few mm to stop: admitted
        assert guard.admits(q, q + slow * dt, slow, a, chain.lower, chain.upper)
    finally:
        model.set_obstacles({})


def test_a_world_changed_under_a_guard_is_seen_at_its_next_step():
    """A guard that judged free space does not trust it after the model's world changed.

    Nothing tells the guard (no ``changed()``): the model's revision does.
    A ball then put 5 mm under the tool is refused a step further down.
    """
    chain, xml, model, _ = arm_model('iiwa14')
    q = np.array(HOME['iiwa14'])
    a, rest = np.full(chain.n, 10.0), np.zeros(chain.n)
    jac = chain.jacobian(q)[:3]
    down = 2e-3 * np.linalg.pinv(jac) @ np.array([0.0, 0.0, -1.0])   # tip 2 mm down
    guard = CollisionGuard(model, 0.01)
    assert guard.admits(q, q + down, rest, a, chain.lower, chain.upper)   # free space known
    tip = chain.forward(q)[:3, 3]
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.05],
                                              'position': list(tip - [0.0, 0.0, 0.2])})
    model.set_obstacles({name: (shape,)})
    try:
        gap = lowest_to(model, q, 'ball')
        shift = gap - 0.005   # the ball raised until it is 5 mm from the arm
        name, shape = posed_obstacle(chain, xml, {
            'name': 'ball', 'shape': 'sphere', 'size': [0.05],
            'position': list(tip - [0.0, 0.0, 0.2 - shift])})
        model.set_obstacles({name: (shape,)})
        assert abs(lowest_to(model, q, 'ball') - 0.005) < 1e-3
        assert not guard.admits(q, q + down, rest, a, chain.lower, chain.upper)
    finally:
        model.set_obstacles({})


@pytest.mark.parametrize('arm', ['panda', 'xarm7'])
@settings(max_examples=examples(6), deadline=None)
@given(data=st.data())
def test_what_a_guard_decides_does_not_depend_on_the_configurations_it_judged_before(arm, data):
    """A guard that has judged other steps (its distances remembered) decides as a fresh one.

    Random steps near random obstacles: each is judged by a guard with a
    history of random earlier steps and by a new guard; admitted or not
    alike.
    """
    chain, xml, model, _ = arm_model(arm)
    unit = st.lists(st.floats(0.05, 0.95), min_size=chain.n, max_size=chain.n)
    entries = data.draw(st.lists(obstacles(), min_size=1, max_size=4))
    model.set_obstacles({f'o{k}': (posed_obstacle(chain, xml, e)[1],)
                         for k, e in enumerate(entries)})
    try:
        a = np.full(chain.n, 8.0)
        decisions = set()
        for _ in range(3):
            q = q_within(chain, data.draw(unit))
            v = data.draw(st.floats(-1.5, 1.5)) * (q_within(chain, data.draw(unit)) - q)
            q1 = q + 0.004 * v
            used = CollisionGuard(model, 0.01)
            for _ in range(data.draw(st.integers(1, 5))):   # steps around this one first
                near = q + np.array(data.draw(st.lists(st.floats(-0.1, 0.1), min_size=chain.n,
                                                       max_size=chain.n)))
                used.admits(near, near + 0.004 * v, v, a, chain.lower, chain.upper)
            fresh = CollisionGuard(model, 0.01)
            decided = used.admits(q, q1, v, a, chain.lower, chain.upper)
            assert decided == fresh.admits(q, q1, v, a, chain.lower, chain.upper)
            decisions.add(decided)
        event(f'decisions {sorted(decisions)}')
    finally:
        model.set_obstacles({})


def assert_changes_within(model, start, there, bound, where):
    """Assert every pair's distance changed from ``start`` to ``there`` by at most ``bound`` (P,).

    Both are ``distances`` of every checked pair; up to GJK_NOISE. ``where``
    goes into the message, with the worst pair's names, change and bound.
    """
    change = np.abs(there.distance - start.distance)
    worst = int(np.argmax(change - bound))
    assert change[worst] <= bound[worst] + GJK_NOISE, (
        model.pair_names(int(start.pairs[worst])), where, change[worst], bound[worst])


@pytest.mark.parametrize('arm', sorted(ARMS))
@settings(max_examples=examples(5), deadline=None)
@given(unit=st.lists(st.floats(0.05, 0.95), min_size=7, max_size=7),
       step=st.lists(st.floats(-0.3, 0.3), min_size=7, max_size=7),
       centre=st.lists(st.floats(-0.7, 0.7), min_size=3, max_size=3))
# A fresh-seed sweep: links 1 and 3 turned together by joint 1 alone (a sweep
# bound of 0) changed by 1.4e-7 m, coal's GJK tolerance, not a motion.
@example(unit=[0.9375, 0.5, 0.05, 0.5, 0.5, 0.5, 0.5], step=[0.25, 0, 0, 0, 0, 0, 0],
         centre=[0.0, 0.0, 0.0])
def test_the_sweep_bound_holds_every_pair_distance_change_along_a_joint_path(
        arm, unit, step, centre):
    """|d(q + s dq) - d(q)| <= sweep @ |s dq| for every checked pair, sampled along s in [0, 1].

    Up to GJK_NOISE: coal answers a rigid pair's distance to its tolerance.
    """
    chain, xml, model, _ = arm_model(arm)
    q = q_within(chain, unit[:chain.n])
    dq = np.array(step[:chain.n])
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.1],
                                              'position': centre})
    model.set_obstacles({name: (shape,)})
    try:
        start = model.distances(q, math.inf)
        assert start.pairs.size == len(model.pairs)
        for s in np.linspace(0.1, 1.0, 10):
            there = model.distances(q + s * dq, math.inf)
            assert_changes_within(model, start, there, model.sweep @ np.abs(s * dq), s)
    finally:
        model.set_obstacles({})


@pytest.mark.parametrize('arm', sorted(ARMS))
@settings(max_examples=examples(5), deadline=None)
@given(unit=st.lists(st.floats(0.05, 0.95), min_size=7, max_size=7),
       step=st.lists(st.floats(-0.4, 0.4), min_size=7, max_size=7),
       windows=st.lists(st.tuples(st.floats(0.0, 0.9), st.floats(0.05, 1.0)), min_size=7,
                        max_size=7),
       centre=st.lists(st.floats(-0.7, 0.7), min_size=3, max_size=3))
def test_a_path_sweep_bounds_every_pair_distance_change_when_the_joints_move_in_turn(
        arm, unit, step, windows, centre):
    """|d(q(s)) - d(q)| <= path_sweep(q, |dq|) @ |q(s) - q| on a path whose joints move in turn.

    Joint i moves over its own window of s in [0, 1] (not a straight line in
    joint space: the arms change as the joints before and after move), by
    dq_i in all. Distances from coal at sampled points, up to GJK_NOISE; the
    path's sweep is never above the model's static one, on both backends, and
    never below the arms measured at any point of the path.
    """
    chain, xml, model, _ = arm_model(arm)
    n = chain.n
    q = q_within(chain, unit[:n])
    dq = np.array(step[:n])
    start_s = np.array([w[0] for w in windows[:n]])
    end_s = np.minimum(1.0, start_s + np.array([w[1] for w in windows[:n]]))
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.1],
                                              'position': centre})
    model.set_obstacles({name: (shape,)})
    try:
        sweeps = []
        for backend in ('numpy', 'numba') if compiled_proximity() is not None else ('numpy',):
            model.set_backend(backend)
            sweeps.append(model.path_sweep(q, np.abs(dq)))
        model.set_backend('auto')
        sweep = numpy_ref.path_sweep(model, q, np.abs(dq))
        for other in sweeps:
            assert np.allclose(other, sweep, rtol=0.0, atol=1e-12)
        assert np.all(sweep <= model.sweep + 1e-12)
        start = model.distances(q, math.inf)
        assert start.pairs.size == len(model.pairs)
        for s in np.linspace(0.05, 1.0, 20):
            there_q = q + dq * np.clip((s - start_s) / (end_s - start_s), 0.0, 1.0)
            # Each arm on the way (measured there, with no travel left) is within the path's.
            assert np.all(model.path_sweep(there_q, np.zeros(n)) <= sweep + 1e-12), s
            there = model.distances(there_q, math.inf)
            assert_changes_within(model, start, there, sweep @ np.abs(there_q - q), s)
    finally:
        model.set_backend('auto')
        model.set_obstacles({})


def test_a_path_sweep_measures_the_arm_from_the_axis_where_the_path_starts():
    """With no travel, a world pair's entry for the iiwa14's first joint (the base's z axis).

    Reference: the robot shape's bounding sphere, posed by the tests' own
    forward kinematics of its link (oracle.RawModel), its distance from the z
    axis plus its radius; the static sweep's arm (a sum of link spans) is
    larger wherever the arm is folded toward the axis.
    """
    chain, xml, model, raw = arm_model('iiwa14')
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.1],
                                              'position': [0.6, 0.0, 0.3]})
    model.set_obstacles({name: (shape,)})
    try:
        q = np.array([0.3, 0.9, -0.4, -1.6, 0.2, 1.1, 0.5])
        values = dict(zip(chain.joint_names, q))
        sweep = model.path_sweep(q, np.zeros(chain.n))
        robot = model.robot_shapes(q)
        tighter = 0
        for p, (i, j) in enumerate(model.pairs):
            if j < len(robot):
                continue
            link, body, _ = robot[i]
            centre, radius = body.bounding_sphere()
            world = raw.pose(chain.base_link, link, values) @ np.append(centre, 1.0)
            arm = math.hypot(world[0], world[1]) + radius
            assert sweep[p, 0] == pytest.approx(min(arm, model.sweep[p, 0]), abs=1e-9)
            tighter += arm < model.sweep[p, 0] - 0.05
        assert tighter >= 3
    finally:
        model.set_obstacles({})


def test_the_library_chosen_gives_the_known_distances_of_the_comparison():
    """coal, the library the model uses, is exact on ik_bench collision's known answers.

    The comparison's record (doc/figures.md): python-fcl 0.7.0.11 gives
    2.236 m for two unit cubes 2 m apart and crashes on a half-space.
    """
    pytest.importorskip('fcl', reason='python-fcl is not installed (the comparison skips)')
    from ik_node.bench.collision_fcl import known_answers
    rows = known_answers()
    assert len(rows) == 4
    for case, exact, ours, _ in rows:
        assert abs(ours - exact) < 1e-9, case


def test_a_pair_only_its_bounding_spheres_put_inside_the_margin_is_not_in_collision():
    """closest_pair judged pairs by the broad phase's list: a plate 2-5 cm away was a hit.

    A wide thin plate's bounding sphere reaches far past the plate; the arm
    near its face, the spheres overlap the margin while the solids do not.
    The distance is checked with the oracle (the tests' FK and solids).
    """
    from ik_node.core.collision.free import closest_pair
    chain, xml, model, raw = arm_model('iiwa14')
    q = np.array(HOME['iiwa14'])
    tip = chain.forward(q)[:3, 3]
    guard = CollisionGuard(model, 0.01)
    try:
        for lift in np.arange(0.0, 0.3, 0.005):   # the plate above the tip, lower and lower
            entry = {'name': 'plate', 'shape': 'box', 'size': [0.6, 0.6, 0.01],
                     'position': list(tip + [0.0, 0.0, 0.3 - lift]), 'orientation': [0, 0, 0, 1]}
            name, shape = posed_obstacle(chain, xml, entry)
            model.set_obstacles({name: (shape,)})
            near = model.distances(q, guard.margin)
            solids = oracle_solids(chain, xml, model, raw, q)
            plate = (shape.kind, shape.size, shape.pose)
            lowest = min(distance_interval(x, plate, 0.02)[0] for link in solids
                         for x in solids[link])
            if near.pairs.size and lowest >= 0.02:
                break
        else:
            pytest.fail('no plate height with overlapping spheres 2 cm or more from the arm')
        assert closest_pair(guard, q) is None
    finally:
        model.set_obstacles({})


def sampled_braking_change(grads, v1, a_max, samples=20001):
    """Return (K,) the lowest of grads @ displacement(t) over a fine time grid, and its slack.

    The test's own braking: each joint decelerates at its limit until its
    velocity is zero (simulated displacement, not the guard's formula). The
    slack bounds how much lower the true minimum can be between grid points:
    |f''| dt^2 / 8 with |f''| <= sum |g a|.
    """
    finite = np.isfinite(a_max)
    stops = np.where(finite, np.abs(v1) / np.where(finite, a_max, 1.0), 0.0)
    end = float(stops.max(initial=0.0))
    times = np.union1d(np.linspace(0.0, end, samples), stops)
    tau = np.minimum(times[:, None], stops[None, :])                       # (T, n)
    decel = np.where(finite, np.sign(v1) * np.where(finite, a_max, 0.0), 0.0)
    v_end = np.where(finite, v1 - decel * tau, 0.0)
    moved = 0.5 * (v1 + v_end) * tau   # the average speed times the time moving
    lowest = np.minimum((grads @ moved.T).min(axis=1), 0.0)
    dt = end / (samples - 1) if samples > 1 else 0.0
    curvature = np.abs(grads) @ np.where(finite, a_max, 0.0)
    return lowest, curvature * dt * dt / 8.0 + 1e-12


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data(), n=st.integers(1, 7), k=st.integers(1, 4))
def test_the_braking_dip_is_the_lowest_change_on_the_braking_path(data, n, k):
    """Both braking-dip paths (numpy, compiled) find the path's lowest point, never above it.

    Gradients, velocities (zeros included) and limits (inf: a joint that
    stops at once) are drawn; the reference samples the braking the test
    simulates itself.
    """
    from ik_node.core.kernels import proximity
    floats = st.floats(-2.0, 2.0, allow_nan=False)
    grads = np.array(data.draw(st.lists(st.lists(floats, min_size=n, max_size=n),
                                        min_size=k, max_size=k)), dtype=np.float64)
    v1 = np.array(data.draw(st.lists(st.one_of(st.just(0.0), st.floats(-3.0, 3.0)),
                                     min_size=n, max_size=n)), dtype=np.float64)
    a_max = np.array(data.draw(st.lists(st.one_of(st.just(math.inf), st.floats(0.5, 20.0)),
                                        min_size=n, max_size=n)), dtype=np.float64)
    reference, slack = sampled_braking_change(grads, v1, a_max)
    found = {'numpy': numpy_ref.braking_dip(grads, v1, a_max)}
    out = np.empty(k)
    proximity.braking_dip(grads, v1, a_max, out)   # the kernel's source, run by CPython
    found['kernel'] = out
    try:
        from ik_node.core.kernels.compile import P
    except ImportError:
        P = None
    if P is not None:
        compiled = np.empty(k)
        P.braking_dip(grads, v1, a_max, compiled)
        found['numba'] = compiled
    for name, value in found.items():
        assert np.all(value <= reference + 1e-12), (name, value, reference)
        assert np.all(value >= reference - slack), (name, value, reference, slack)
        assert np.all(value <= 0.0), name


def compiled_proximity():
    """Return the compiled proximity kernels, or None without numba."""
    try:
        from ik_node.core.kernels.compile import P
    except ImportError:
        return None
    return P


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data(), n=st.integers(1, 7), k=st.integers(1, 5))
def test_the_slid_goal_projection_meets_orthogonal_constraints_exactly(data, n, k):
    """Every path of the slide's projection gives the closed-form answer on orthogonal rows.

    With orthogonal gradients the nearest x to x0 with ``g_i . x >= need_i``
    moves x0 along each violated g_i by its shortfall over |g_i|^2, the
    others untouched: computed here, not by the code under test. Rows that
    clear their need by the slack or more, and zero rows, are left out.
    """
    from ik_node.core.collision.guard import ACTIVE_SLACK, SLIDE_SWEEPS
    from ik_node.core.kernels import proximity
    k = min(k, n)
    seed = data.draw(st.integers(0, 2 ** 31 - 1))
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(n, n)))
    scale = data.draw(st.lists(st.one_of(st.just(0.0), st.floats(0.05, 2.0)),
                               min_size=k, max_size=k))
    grads = np.ascontiguousarray(basis[:k] * np.array(scale)[:, None])
    x0 = rng.uniform(-1.0, 1.0, n)
    need = grads @ x0 + rng.uniform(-0.05, 0.05, k)
    expected = x0.copy()
    for g, b in zip(grads, need):
        norm = float(g @ g)
        if norm > 1e-18 and g @ x0 - b < ACTIVE_SLACK and g @ x0 < b:
            expected += (b - g @ x0) / norm * g
    found = {'numpy': numpy_ref.slide_projection(x0, grads, need, ACTIVE_SLACK, SLIDE_SWEEPS)}
    out = np.empty(n)
    proximity.slide_projection(x0, grads, need, ACTIVE_SLACK, SLIDE_SWEEPS, out)
    found['kernel'] = out
    compiled = compiled_proximity()
    if compiled is not None:
        out = np.empty(n)
        compiled.slide_projection(x0, grads, need, ACTIVE_SLACK, SLIDE_SWEEPS, out)
        found['numba'] = out
    for name, x in found.items():
        assert np.allclose(x, expected, rtol=0.0, atol=1e-9), (name, x, expected)


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data(), n=st.integers(1, 7), k=st.integers(1, 12))
def test_the_slid_goal_projection_is_the_same_compiled_and_in_numpy(data, n, k):
    """The compiled projection gives the numpy reference's answer on any rows (dependent ones)."""
    from ik_node.core.collision.guard import ACTIVE_SLACK, SLIDE_SWEEPS
    compiled = compiled_proximity()
    if compiled is None:
        pytest.skip('numba is not installed')
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 31 - 1)))
    grads = rng.normal(size=(k, n)) * (rng.uniform(size=(k, 1)) > 0.1)
    x0 = rng.uniform(-1.0, 1.0, n)
    need = grads @ x0 + rng.uniform(-0.05, 0.05, k)
    out = np.empty(n)
    compiled.slide_projection(x0, grads, need, ACTIVE_SLACK, SLIDE_SWEEPS, out)
    expected = numpy_ref.slide_projection(x0, grads, need, ACTIVE_SLACK, SLIDE_SWEEPS)
    assert np.allclose(out, expected, rtol=0.0, atol=1e-9)


def braking_start(chain, data):
    """Draw where braking starts: q1 (n,) within the limits, v1 (n,) rad/s, a_max (n,) rad/s^2.

    About a fifth of the joints at rest, and a fifth with no acceleration
    limit (inf: they stop at once).
    """
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 31 - 1)))
    n = chain.n
    q1 = rng.uniform(chain.lower, chain.upper)
    v1 = rng.uniform(-2.5, 2.5, n) * (rng.uniform(size=n) > 0.2)
    a_max = np.where(rng.uniform(size=n) > 0.2, rng.uniform(1.0, 20.0, n), math.inf)
    return q1, v1, a_max


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_the_stopping_point_and_each_pairs_need_are_the_same_in_every_path(data):
    """The guard's stopping point is where braking at the limits ends; its need adds the sweep.

    Reference: each joint decelerating at a_max from v covers v^2 / (2 a)
    (none with an infinite limit), clipped to the position limits; a pair
    needs the margin plus its sweep row times the travel, summed here.
    """
    from ik_node.core.kernels import proximity
    chain, _, model, _ = arm_model('panda')
    n = chain.n
    q1, v1, a_max = braking_start(chain, data)
    travel = np.array([v * abs(v) / (2.0 * a) if math.isfinite(a) else 0.0
                       for v, a in zip(v1, a_max)])
    stop = np.minimum(np.maximum(q1 + travel, chain.lower), chain.upper)
    need = np.array([0.01 + sum(row[i] * abs(stop[i] - q1[i]) for i in range(n))
                     for row in model.sweep])
    paths = [proximity]
    compiled = compiled_proximity()
    if compiled is not None:
        paths.append(compiled)
    for kernels in paths:
        s_out, n_out = np.empty(n), np.empty(len(model.pairs))
        kernels.stop_and_need(q1, v1, a_max, chain.lower, chain.upper, model.sweep, 0.01,
                              s_out, n_out)
        assert np.allclose(s_out, stop, rtol=0.0, atol=1e-12)
        assert np.allclose(n_out, need, rtol=0.0, atol=1e-12)
    for backend in ('numpy', 'numba') if compiled is not None else ('numpy',):
        model.set_backend(backend)
        try:
            s_out, n_out = CollisionGuard(model, 0.01)._stop_and_need(q1, v1, a_max,
                                                                      chain.lower, chain.upper)
        finally:
            model.set_backend('auto')
        assert np.allclose(s_out, stop, rtol=0.0, atol=1e-12), backend
        assert np.allclose(n_out, need, rtol=0.0, atol=1e-12), backend


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data(), pieces=st.integers(1, 8))
def test_the_braking_path_is_where_braking_at_the_limits_is_after_each_equal_time(data, pieces):
    """Each row is where integrating the braking in small time steps puts the joints.

    Reference: every joint decelerating at its own a_max from v until it
    rests (at once with an infinite limit), integrated in 20,160 steps of the
    whole time (to 1e-7 rad: a joint coming to rest inside a step) and
    sampled at k of ``pieces`` equal times, clipped to the limits; the last
    row is the stop given. Each piece's needs add each pair's sweep row times
    the piece's way. Both backends, through the guard.
    """
    chain, _, model, _ = arm_model('panda')
    n = chain.n
    q1, v1, a_max = braking_start(chain, data)
    rests = np.where(np.isfinite(a_max), np.abs(v1) / a_max, 0.0)
    steps = 840 * 24   # 840: every piece count up to 8 divides it
    dt = float(rests.max()) / steps
    q, v = q1.copy(), np.where(np.isfinite(a_max), v1, 0.0)   # infinite: at rest at once
    expected = [q1.copy()]
    for step in range(1, steps + 1):
        dv = np.sign(v) * np.minimum(np.abs(v), a_max * dt)
        q += (v - 0.5 * dv) * dt   # exact within a step of constant deceleration
        v -= dv
        if step % (steps // pieces) == 0 and len(expected) < pieces:
            expected.append(np.clip(q, chain.lower, chain.upper))
    stop = np.clip(q, chain.lower, chain.upper)
    expected.append(stop)
    expected = np.array(expected)
    sweep = model.sweep
    for backend in ('numpy', 'numba') if compiled_proximity() is not None else ('numpy',):
        model.set_backend(backend)
        try:
            configs, speeds, got = CollisionGuard(model, 0.01)._braking_path(
                q1, v1, a_max, chain.lower, chain.upper, stop, sweep, pieces)
        finally:
            model.set_backend('auto')
        assert np.allclose(configs, expected, rtol=0.0, atol=1e-7), backend
        assert np.array_equal(speeds[0], v1), backend
        # Each joint slows toward rest and never turns back.
        assert np.all(np.diff(np.abs(speeds), axis=0) <= 1e-12), backend
        assert np.all(speeds * v1 >= 0.0), backend
        ways = np.abs(np.diff(configs, axis=0))
        needs = 0.01 + np.array([[sum(row[i] * way[i] for i in range(n)) for row in sweep]
                                 for way in ways])
        assert np.allclose(got, needs, rtol=0.0, atol=1e-12), backend


@pytest.mark.parametrize('arm', sorted(ARMS))
@settings(max_examples=examples(4), deadline=None)
@given(unit=st.lists(st.floats(0.1, 0.9), min_size=7, max_size=7),
       speed=st.lists(st.floats(-2.0, 2.0), min_size=7, max_size=7),
       centre=st.lists(st.floats(-0.7, 0.7), min_size=3, max_size=3))
def test_bounds_learnt_on_a_braking_path_stay_below_the_distances_on_it(
        arm, unit, speed, centre):
    """What PathBounds leaves at a point of the path is never above coal's distance there.

    Exact distances learnt at each of 8 points of a braking path (with its
    ``path_sweep``) are carried to every later point: each pair's bound
    there stays at or below coal's distance, up to GJK_NOISE, and at or
    above the last point's distance less the path's sweep over the way from
    it (what is kept is never looser). Both backends, alike.
    """
    from ik_node.core.collision.guard import PathBounds
    chain, xml, model, _ = arm_model(arm)
    n = chain.n
    q1, v1 = q_within(chain, unit[:n]), np.array(speed[:n])
    a_max = np.full(n, 5.0)
    name, shape = posed_obstacle(chain, xml, {'name': 'ball', 'shape': 'sphere', 'size': [0.1],
                                              'position': centre})
    model.set_obstacles({name: (shape,)})
    try:
        guard = CollisionGuard(model, 0.01)
        stop, _ = guard._stop_and_need(q1, v1, a_max, chain.lower, chain.upper)
        sweep = model.path_sweep(q1, np.abs(stop - q1))
        configs, _, _ = guard._braking_path(q1, v1, a_max, chain.lower, chain.upper, stop,
                                            sweep, 8)
        exact = [model.distances(c, math.inf).distance for c in configs]
        carried = []
        for backend in ('numpy', 'numba') if compiled_proximity() is not None else ('numpy',):
            model.set_backend(backend)
            path = PathBounds(sweep, len(model.pairs), n)
            for k, config in enumerate(configs):
                floors = np.full(len(model.pairs), -math.inf)
                path.tighten(model.kernels, config, np.zeros(len(model.pairs)), floors)
                worst = int(np.argmax(floors - exact[k]))
                assert floors[worst] <= exact[k][worst] + GJK_NOISE, (
                    backend, model.pair_names(worst), k, floors[worst], exact[k][worst])
                if k:
                    kept = exact[k - 1] - sweep @ np.abs(config - configs[k - 1])
                    assert np.all(floors >= kept - 1e-12), (backend, k)
                carried.append(floors)
                path.learn(model.kernels, config, exact[k])
        for ours, theirs in zip(carried[:len(configs)], carried[len(configs):]):
            assert np.allclose(ours, theirs, rtol=0.0, atol=1e-12)
    finally:
        model.set_backend('auto')
        model.set_obstacles({})


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1), pairs=st.integers(0, 12))
def test_a_bound_is_remembered_only_where_it_is_tighter_than_what_was_held(seed, pairs):
    """The guard's memory keeps a pair's new bound and q only where it beats the held one."""
    from ik_node.core.kernels import proximity
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.0, 1.0, 7)
    floors = rng.uniform(-0.1, 0.3, pairs)
    held = np.where(rng.uniform(size=pairs) < 0.2, -np.inf, rng.uniform(-0.1, 0.3, pairs))
    start_d, start_q = rng.uniform(-0.1, 0.3, pairs), rng.uniform(-1.0, 1.0, (pairs, 7))
    paths = [proximity] + [k for k in [compiled_proximity()] if k is not None]
    for kernels in paths:
        known_d, known_q = start_d.copy(), start_q.copy()
        kernels.remember(q, floors, held, known_d, known_q)
        for p in range(pairs):
            if floors[p] > held[p]:
                assert known_d[p] == floors[p] and np.array_equal(known_q[p], q)
            else:
                assert known_d[p] == start_d[p] and np.array_equal(known_q[p], start_q[p])
