# SPDX-License-Identifier: Apache-2.0

"""Every link of a large description resolves to the pose the URDF implies, in linear work."""

from hypothesis import given, settings, strategies as st
from ik_node.core.model.frames import FrameError
import ik_node.description.urdf
from ik_node.description.urdf import bundled_urdf, chain_from_urdf_string, link_frames
import numpy as np
import pytest

IIWA = open(bundled_urdf('iiwa14.urdf'), encoding='utf-8').read()
BASE, TIP = 'iiwa_link_0', 'tool0'


def fixed(name, parent, xyz=(0.0, 0.0, 0.001), rpy=(0.0, 0.0, 0.0)):
    """URDF of one link hung under ``parent`` by a fixed joint."""
    return (f'<link name="{name}"/><joint name="{name}_joint" type="fixed">'
            f'<parent link="{parent}"/><child link="{name}"/>'
            f'<origin xyz="{" ".join(map(str, xyz))}" rpy="{" ".join(map(str, rpy))}"/>'
            '</joint>')


def description(deep: int, star: int) -> str:
    """Return the iiwa14 with more links.

    ``deep`` fixed links in a row under the tool, ``star`` fixed links under
    the base, and a gripper finger (a joint not of the chain) with its pad.
    """
    parts = [fixed(f'deep_{i}', TIP if i == 0 else f'deep_{i - 1}',
                   (0.0, 0.001 * (i % 3), 0.002), (0.01, 0.0, 0.02)) for i in range(deep)]
    parts += [fixed(f'star_{i}', BASE, (0.01 * i, 0.0, 0.0)) for i in range(star)]
    parts.append('<link name="finger"/><joint name="finger_joint" type="prismatic">'
                 f'<parent link="{TIP}"/><child link="finger"/><axis xyz="0 1 0"/>'
                 '<limit lower="0" upper="0.04" velocity="0.1" effort="10"/></joint>')
    parts.append(fixed('finger_pad', 'finger'))
    return IIWA.replace('</robot>', ''.join(parts) + '</robot>')


def oracle_pose(xml, link, chain, q):
    """Pose of ``link`` in the base frame from a chain built base -> link (another path)."""
    sub = chain_from_urdf_string(xml, BASE, link)
    values = [q[chain.joint_names.index(name)] for name in sub.joint_names]
    return sub.forward(np.array(values))


@settings(max_examples=20)
@given(st.lists(st.floats(-1.0, 1.0), min_size=7, max_size=7), st.integers(0, 120))
def test_links_below_the_tool_follow_the_chain(values, which):
    xml = description(deep=121, star=3)
    chain = chain_from_urdf_string(xml, BASE, TIP)
    frames = link_frames(xml, chain)
    q = np.clip(np.array(values), chain.lower, chain.upper)
    for link in (f'deep_{which}', TIP, 'iiwa_link_4'):
        np.testing.assert_allclose(frames.pose(link, q), oracle_pose(xml, link, chain, q),
                                   atol=1e-12)
    star = np.eye(4)
    star[0, 3] = 0.02   # star_2: bolted to the base 2 cm along x
    np.testing.assert_array_equal(frames.pose('star_2', q), star)


def test_a_link_moved_by_a_joint_not_of_the_chain_is_refused_with_the_joint():
    xml = description(deep=2, star=0)
    frames = link_frames(xml, chain_from_urdf_string(xml, BASE, TIP))
    for link in ('finger', 'finger_pad'):
        with pytest.raises(FrameError, match="joint 'finger_joint' moves it"):
            frames.pose(link, np.zeros(7))


@pytest.mark.parametrize('deep, star', [(1000, 0), (0, 1000), (500, 500)])
def test_resolving_every_link_takes_work_linear_in_the_links(monkeypatch, deep, star):
    """Joint conversions counted: at most a few per link (1,000 in a row took N^2 / 2)."""
    calls = {'joint': 0, 'origin': 0}
    for name in calls:
        original = getattr(ik_node.description.urdf, f'_{name}')

        def counted(*args, name=name, original=original):
            calls[name] += 1
            return original(*args)
        monkeypatch.setattr(ik_node.description.urdf, f'_{name}', counted)
    xml = description(deep, star)
    frames = link_frames(xml, chain_from_urdf_string(xml, BASE, TIP))
    links = deep + star + 12   # + the iiwa14's 10 links, the finger and its pad
    assert len(frames.names()) == links - 2
    assert calls['joint'] + calls['origin'] <= 4 * links, calls


def hand(multiplier, offset):
    """Return the iiwa14 with a two-finger hand under the tool: finger_b mimics finger_a."""
    parts = ('<link name="finger_a"/><joint name="finger_a_joint" type="prismatic">'
             f'<parent link="{TIP}"/><child link="finger_a"/><origin xyz="0 0.01 0.05"/>'
             '<axis xyz="0 1 0"/><limit lower="0" upper="0.04" velocity="0.1" effort="1"/>'
             '</joint><link name="finger_b"/><joint name="finger_b_joint" type="prismatic">'
             f'<parent link="{TIP}"/><child link="finger_b"/><origin xyz="0 -0.01 0.05" '
             'rpy="0 0 0.3"/><axis xyz="0 -1 0.2"/>'
             '<limit lower="-1" upper="1" velocity="0.1" effort="1"/>'
             f'<mimic joint="finger_a_joint" multiplier="{multiplier!r}" offset="{offset!r}"/>'
             '</joint>' + fixed('finger_b_pad', 'finger_b'))
    return IIWA.replace('</robot>', parts + '</robot>')


@settings(max_examples=15)
@given(st.floats(-3.0, 3.0), st.floats(-0.5, 0.5),
       st.lists(st.floats(-1.0, 1.0), min_size=8, max_size=8))
def test_a_mimic_of_a_chain_joint_off_the_way_follows_its_leader(multiplier, offset, values):
    """Chain base -> finger_a: finger_b (a mimic of finger_a, beside it) is a target frame.

    Its pose is the raw XML's (oracle.RawModel), with the mimic's multiplier
    and offset; the node's chain to the other hand, base -> tool, refuses
    both fingers with the joint that moves them.
    """
    from oracle import RawModel
    xml = hand(multiplier, offset)
    chain = chain_from_urdf_string(xml, BASE, 'finger_a')
    frames = link_frames(xml, chain)
    q = np.clip(np.array(values), chain.lower, chain.upper)
    raw_values = dict(zip(chain.joint_names, q))
    for link in ('finger_b', 'finger_b_pad'):
        np.testing.assert_allclose(frames.pose(link, q),
                                   RawModel(xml).pose(BASE, link, raw_values), atol=1e-12)
    tool = link_frames(xml, chain_from_urdf_string(xml, BASE, TIP))
    with pytest.raises(FrameError, match="joint 'finger_b_joint' moves it, mimicking "
                                         "'finger_a_joint'"):
        tool.pose('finger_b_pad', np.zeros(7))
    assert 'finger_a' in tool.refused() and tool.summary().startswith(
        f'{len(tool.names())} of {len(tool.names()) + 3} links usable as target frames; 3 not')


def test_a_malformed_joint_beside_the_chain_refuses_its_links_not_the_model():
    """A camera mount with a NaN origin and a finger with inverted limits, beside the arm.

    The chain base -> tool loads and its links resolve; the two links (and
    the pad below the finger) are refused with what is wrong with their
    joints; a chain through the bad finger is refused at load, as before.
    """
    parts = ('<link name="camera"/><joint name="camera_mount" type="fixed">'
             f'<parent link="{BASE}"/><child link="camera"/><origin xyz="0 nan 0.1"/></joint>'
             '<link name="finger"/><joint name="finger_joint" type="prismatic">'
             f'<parent link="{TIP}"/><child link="finger"/><axis xyz="0 1 0"/>'
             '<limit lower="0.04" upper="0" velocity="0.1" effort="1"/></joint>'
             + fixed('finger_pad', 'finger'))
    xml = IIWA.replace('</robot>', parts + '</robot>')
    chain = chain_from_urdf_string(xml, BASE, TIP)
    frames = link_frames(xml, chain)
    refused = frames.refused()
    assert set(refused) == {'camera', 'finger', 'finger_pad'}
    assert "joint 'camera_mount': origin xyz/rpy must be 3 finite numbers" in refused['camera']
    assert refused['finger_pad'] == refused['finger']
    assert 'iiwa_link_4' in frames.names() and TIP in frames.names()
    with pytest.raises(ik_node.description.urdf.UrdfError, match='camera_mount'):
        chain_from_urdf_string(xml, BASE, 'camera')
