# SPDX-License-Identifier: Apache-2.0

"""Chain FK and Jacobian against independent references and finite differences."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node import Chain
from ik_node.bench.corpus import CORPUS, corpus_path
from ik_node.core import rotations as rot
from ik_node.core.errors import InvalidInputError
from ik_node.description.urdf import chain_from_urdf_string
from models import ARMS, MIXED_URDF, random_q, reference_forward, URDF_CORPUS
import numpy as np
import pytest


def numeric_jacobian(chain, q, h=1e-6):
    """Central differences of FK: linear from positions, angular from R+ R-^T."""
    cols = []
    for j in range(q.size):
        e = np.zeros_like(q)
        e[j] = h
        tp, tm = chain.forward(q + e), chain.forward(q - e)
        lin = (tp[:3, 3] - tm[:3, 3]) / (2 * h)
        dq = rot.matrix_to_quaternion(tp[:3, :3] @ tm[:3, :3].T)
        ang = 2.0 * rot.log(dq) / (2 * h)
        cols.append(np.concatenate((lin, ang)))
    return np.stack(cols, axis=1)


@pytest.fixture(scope='module', params=sorted(ARMS))
def arm(request):
    path, base, tip = ARMS[request.param]
    return Chain.from_urdf_file(str(path), base, tip), path.read_text(), base, tip


def test_bundled_arms_have_the_published_shape():
    iiwa = Chain.from_urdf_file(str(ARMS['iiwa14'][0]), 'iiwa_link_0', 'tool0')
    assert iiwa.n == 7
    np.testing.assert_allclose(iiwa.forward(np.zeros(7))[:3, 3], [0, 0, 1.306], atol=1e-12)
    np.testing.assert_allclose(np.degrees(iiwa.upper), [170, 120, 170, 120, 170, 120, 175])
    ur = Chain.from_urdf_file(str(ARMS['ur5e'][0]), 'base_link', 'tool0')
    assert ur.n == 6
    # UR5e zero pose: (a2 + a3, -(d4 + d6), d1 - d5), tool z along -y.
    np.testing.assert_allclose(ur.forward(np.zeros(6))[:3, 3], [-0.8172, -0.2329, 0.0628],
                               atol=1e-12)


def ur5e_dh_forward(q):
    """UR5e FK from UR's published DH table (standard DH), independent of the URDF."""
    d = [0.1625, 0, 0, 0.1333, 0.0997, 0.0996]
    a = [0, -0.425, -0.3922, 0, 0, 0]
    alpha = [np.pi / 2, 0, 0, np.pi / 2, -np.pi / 2, 0]
    t = np.eye(4)
    for i in range(6):
        ct, st_, ca, sa = np.cos(q[i]), np.sin(q[i]), np.cos(alpha[i]), np.sin(alpha[i])
        t = t @ np.array([[ct, -st_ * ca, st_ * sa, a[i] * ct],
                          [st_, ct * ca, -ct * sa, a[i] * st_],
                          [0, sa, ca, d[i]], [0, 0, 0, 1]])
    return t


def test_ur5e_urdf_matches_the_dh_table():
    chain = Chain.from_urdf_file(str(ARMS['ur5e'][0]), 'base_link', 'tool0')
    rng = np.random.default_rng(3)
    for _ in range(200):
        q = random_q(chain, rng)
        np.testing.assert_allclose(chain.forward(q), ur5e_dh_forward(q), atol=1e-12)


def modified_dh_forward(rows, q, flange):
    """FK of Craig's modified DH rows (a_{i-1}, d_i, alpha_{i-1}), then Tz(flange)."""
    t = np.eye(4)
    for (a, d, alpha), angle in zip(rows, q):
        ca, sa, ct, st_ = np.cos(alpha), np.sin(alpha), np.cos(angle), np.sin(angle)
        t = t @ np.array([[ct, -st_, 0, a],
                          [st_ * ca, ct * ca, -sa, -sa * d],
                          [st_ * sa, ct * sa, ca, ca * d], [0, 0, 0, 1]])
    return t @ np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, flange], [0, 0, 0, 1]])


def standard_dh_forward(rows, q):
    """FK of standard DH rows (d_i, a_i, alpha_i), no theta offsets."""
    t = np.eye(4)
    for (d, a, alpha), angle in zip(rows, q):
        ct, st_, ca, sa = np.cos(angle), np.sin(angle), np.cos(alpha), np.sin(alpha)
        t = t @ np.array([[ct, -st_ * ca, st_ * sa, a * ct],
                          [st_, ct * ca, -ct * sa, a * st_],
                          [0, sa, ca, d], [0, 0, 0, 1]])
    return t


# The makers' published tables (see the comment at the top of each URDF).
PANDA_MDH = [(0, 0.333, 0), (0, 0, -np.pi / 2), (0, 0.316, np.pi / 2), (0.0825, 0, np.pi / 2),
             (-0.0825, 0.384, -np.pi / 2), (0, 0, np.pi / 2), (0.088, 0, np.pi / 2)]
XARM7_DH = [(0.267, 0, -np.pi / 2), (0, 0, np.pi / 2), (0.293, 0.0525, np.pi / 2),
            (0, 0.0775, np.pi / 2), (0.3425, 0, np.pi / 2), (0, 0.076, -np.pi / 2),
            (0.097, 0, 0)]


@pytest.mark.parametrize('name, forward', [
    ('panda', lambda q: modified_dh_forward(PANDA_MDH, q, 0.107)),
    ('xarm7', lambda q: standard_dh_forward(XARM7_DH, q)),
])
def test_panda_and_xarm7_urdfs_match_the_makers_dh_tables(name, forward):
    path, base, tip = ARMS[name]
    chain = Chain.from_urdf_file(str(path), base, tip)
    assert chain.n == 7
    rng = np.random.default_rng(4)
    for _ in range(200):
        q = random_q(chain, rng)
        np.testing.assert_allclose(chain.forward(q), forward(q), atol=1e-12)


def test_panda_and_xarm7_zero_poses_and_limits_are_the_published_ones():
    panda = Chain.from_urdf_file(str(ARMS['panda'][0]), 'panda_link0', 'tool0')
    # Flange at zero: (a4 + a5 + a7, 0, d1 + d3 + d5 - flange) = (0.088, 0, 0.926), pointing down.
    np.testing.assert_allclose(panda.forward(np.zeros(7))[:3, 3], [0.088, 0, 0.926], atol=1e-12)
    np.testing.assert_allclose(panda.lower, [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973,
                                             -0.0175, -2.8973])
    np.testing.assert_allclose(panda.upper, [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525,
                                             2.8973])
    xarm = Chain.from_urdf_file(str(ARMS['xarm7'][0]), 'link_base', 'tool0')
    np.testing.assert_allclose(xarm.forward(np.zeros(7))[:3, 3], [0.206, 0, 0.1205], atol=1e-12)
    np.testing.assert_allclose(np.degrees(xarm.velocity), [180.0] * 7, rtol=1e-6)


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_forward_matches_independent_fk(arm, seed):
    chain, xml, base, tip = arm
    q = random_q(chain, np.random.default_rng(seed))
    values = dict(zip(chain.joint_names, q))
    np.testing.assert_allclose(chain.forward(q), reference_forward(xml, base, tip, values),
                               atol=1e-12)


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_jacobian_matches_finite_differences(arm, seed):
    chain = arm[0]
    q = random_q(chain, np.random.default_rng(seed))
    jac = chain.jacobian(q)
    assert jac.shape == (6, chain.n)
    np.testing.assert_allclose(jac, numeric_jacobian(chain, q), atol=1e-8)
    tip, jac2 = chain.forward_and_jacobian(q)
    np.testing.assert_array_equal(jac2, jac)
    np.testing.assert_array_equal(tip, chain.forward(q))


def test_mixed_joint_kinds_forward_and_jacobian():
    chain = Chain.from_urdf_string(MIXED_URDF, 'base', 'tip')
    assert chain.joint_names == ['slide', 'spin', 'bend', 'twist']
    assert list(chain.continuous) == [False, True, False, False]
    assert np.isinf(chain.lower[1]) and np.isinf(chain.upper[1])
    # follow = -0.5 bend + 0.1 must stay in [-1, 1]: bend in [-1.8, 2.2],
    # intersected with bend's own [-2, 2].
    assert chain.lower[2] == pytest.approx(-1.8) and chain.upper[2] == pytest.approx(2.0)
    rng = np.random.default_rng(11)
    for _ in range(50):
        q = random_q(chain, rng)
        values = dict(zip(chain.joint_names, q))
        values['follow'] = -0.5 * values['bend'] + 0.1
        np.testing.assert_allclose(chain.forward(q),
                                   reference_forward(MIXED_URDF, 'base', 'tip', values),
                                   atol=1e-12)
        np.testing.assert_allclose(chain.jacobian(q), numeric_jacobian(chain, q), atol=1e-8)


def test_tip_may_be_any_link_below_the_base():
    chain = Chain.from_urdf_string(MIXED_URDF, 'a', 'c')
    assert chain.joint_names == ['spin', 'bend']
    q = np.array([0.3, -0.4])
    values = {'spin': 0.3, 'bend': -0.4}
    np.testing.assert_allclose(chain.forward(q), reference_forward(MIXED_URDF, 'a', 'c', values),
                               atol=1e-12)


def test_joint_vector_is_validated():
    chain = Chain.from_urdf_file(str(ARMS['ur5e'][0]), 'base_link', 'tool0')
    with pytest.raises(InvalidInputError, match=r'expected shape \(6,\)'):
        chain.forward(np.zeros(7))
    with pytest.raises(InvalidInputError, match='finite'):
        chain.jacobian([0, 0, np.nan, 0, 0, 0])
    assert chain.within_limits(chain.mid_limits())
    assert not chain.within_limits(chain.upper + 1e-3)


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_reach_bound_holds_for_every_configuration(arm, seed):
    chain = arm[0]
    q = random_q(chain, np.random.default_rng(seed))
    assert np.linalg.norm(chain.forward(q)[:3, 3]) <= chain.reach_bound()


# One prismatic joint: the tip at (0.3 + q, 0, 0.5), q in [-0.2, 0.7].
SLIDER_URDF = """<robot name="slider">
  <link name="a"/><link name="b"/><link name="c"/>
  <joint name="j1" type="prismatic"><parent link="a"/><child link="b"/>
    <origin xyz="0 0 0.5"/><axis xyz="1 0 0"/>
    <limit lower="-0.2" upper="0.7" effort="1" velocity="1"/></joint>
  <joint name="j2" type="fixed"><parent link="b"/><child link="c"/>
    <origin xyz="0.3 0 0"/></joint>
</robot>"""


def test_reach_bound_counts_prismatic_travel():
    chain = Chain.from_urdf_string(SLIDER_URDF, 'a', 'c')
    # Tip at (0.3 + q, 0, 0.5): farthest at q = 0.7, |(1.0, 0, 0.5)| = 1.118 <= 0.5 + 0.3 + 0.7.
    assert chain.reach_bound() == pytest.approx(1.5)
    assert np.linalg.norm(chain.forward(np.array([0.7]))[:3, 3]) <= chain.reach_bound()


def _sphere_chains():
    """Chains to test reach_sphere on: the bundled arms, every joint kind, others' descriptions."""
    chains = {name: Chain.from_urdf_file(str(path), base, tip)
              for name, (path, base, tip) in ARMS.items()}
    chains['mixed'] = Chain.from_urdf_string(MIXED_URDF, 'base', 'tip')
    for file, base, tip in CORPUS:
        with open(corpus_path(file, str(URDF_CORPUS / 'external')), encoding='utf-8') as f:
            chains[f'{file}:{tip}'] = chain_from_urdf_string(f.read(), base, tip)
    return chains


SPHERE_CHAINS = _sphere_chains()


@pytest.mark.parametrize('name', sorted(SPHERE_CHAINS))
def test_every_tip_position_lies_in_the_reach_sphere(name):
    chain = SPHERE_CHAINS[name]
    centre, radius = chain.reach_sphere()
    assert radius <= chain.reach_bound() + 1e-12
    rng = np.random.default_rng(11)
    farthest = 0.0
    for _ in range(3000):
        q = random_q(chain, rng)
        ends = np.where(rng.random(chain.n) < 0.5, chain.lower, chain.upper)
        pin = (rng.random(chain.n) < 0.2) & np.isfinite(ends)   # some joints at a limit
        q = np.where(pin, ends, q)
        farthest = max(farthest, float(np.linalg.norm(chain.forward(q)[:3, 3] - centre)))
    assert farthest <= radius * (1.0 + 1e-12)
    if name == 'iiwa14':   # every offset along an axis or through it: the ball is tight
        assert farthest > 0.99 * radius


def test_the_reach_sphere_of_a_shoulder_is_its_ball():
    # Turn about z at the origin, then about y 0.5 m up, a 0.3 m link: the tip
    # covers the sphere of 0.3 m around (0, 0, 0.5); reach_bound says 0.8 m.
    xml = """<robot name="shoulder">
      <link name="a"/><link name="b"/><link name="c"/><link name="d"/>
      <joint name="pan" type="continuous"><parent link="a"/><child link="b"/>
        <axis xyz="0 0 1"/></joint>
      <joint name="lift" type="continuous"><parent link="b"/><child link="c"/>
        <origin xyz="0 0 0.5"/><axis xyz="0 1 0"/></joint>
      <joint name="hand" type="fixed"><parent link="c"/><child link="d"/>
        <origin xyz="0.3 0 0"/></joint>
    </robot>"""
    chain = Chain.from_urdf_string(xml, 'a', 'd')
    centre, radius = chain.reach_sphere()
    np.testing.assert_allclose(centre, [0.0, 0.0, 0.5], atol=1e-12)
    assert radius == pytest.approx(0.3) and chain.reach_bound() == pytest.approx(0.8)


def test_the_reach_sphere_of_a_slide_spans_its_travel():
    # The tip covers the segment x in [0.1, 1.0] at y = 0, z = 0.5.
    centre, radius = Chain.from_urdf_string(SLIDER_URDF, 'a', 'c').reach_sphere()
    np.testing.assert_allclose(centre, [0.55, 0.0, 0.5], atol=1e-12)
    assert radius == pytest.approx(0.45)


def test_a_mimic_follower_bounds_its_leaders_speed_and_range():
    """Follower = -0.5 bend + 0.1 in [-1, 1] at 1 rad/s: bend in [-1.8, 2], at most 2 rad/s.

    Then a slower follower (0.2 rad/s) makes bend at most 0.4 rad/s.
    """
    chain = Chain.from_urdf_string(MIXED_URDF, 'base', 'tip')
    bend = chain.joint_names.index('bend')
    assert (chain.lower[bend], chain.upper[bend]) == pytest.approx((-1.8, 2.0))
    assert chain.velocity[bend] == pytest.approx(1.0)     # its own 1 rad/s is the lower one
    slow = MIXED_URDF.replace('<limit lower="-1" upper="1" velocity="1" effort="1"/>\n'
                              '    <mimic', '<limit lower="-1" upper="1" velocity="0.2" '
                              'effort="1"/>\n    <mimic')
    assert slow != MIXED_URDF
    chain = Chain.from_urdf_string(slow, 'base', 'tip')
    assert chain.velocity[bend] == pytest.approx(0.4)
    assert chain.mimics == [('follow', bend, -0.5, 0.1)]
    np.testing.assert_allclose(chain.mimic_values([0.0, 0.0, 1.0, 0.0]), [-0.4])
