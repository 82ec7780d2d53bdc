# SPDX-License-Identifier: Apache-2.0

"""Models the tests share: the bundled arms, a robot with every joint kind, an independent FK."""

from pathlib import Path

import numpy as np
import transforms3d
from urdf_parser_py import urdf as urdf_module

# The checkout (test/helpers/ -> the repository root).
ROOT = Path(__file__).resolve().parents[2]
TEST = ROOT / 'test'
URDF_CORPUS = TEST / 'urdf_corpus'
# Bundled arm -> (URDF path, base link, tip link).
ARMS = {
    'iiwa14': (ROOT / 'urdf' / 'iiwa14.urdf', 'iiwa_link_0', 'tool0'),
    'ur5e': (ROOT / 'urdf' / 'ur5e.urdf', 'base_link', 'tool0'),
    'panda': (ROOT / 'urdf' / 'panda.urdf', 'panda_link0', 'tool0'),
    'xarm7': (ROOT / 'urdf' / 'xarm7.urdf', 'link_base', 'tool0'),
}
# Each bundled arm's home: its config's initial_positions (the UR5e's config
# has none; a bent pose clear of its own links, as tracking.ARMS uses).
HOME = {
    'iiwa14': [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0],
    'ur5e': [0.3, -1.2, 1.5, -1.9, -1.57, 0.2],
    'panda': [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398],
    'xarm7': [0.0, -0.247, 0.0, 0.909, 0.0, 1.156, 0.0],
}

# A small robot exercising every joint kind: prismatic, continuous, a mimic
# follower (with multiplier and offset), fixed joints with rpy, an odd axis.
MIXED_URDF = """<?xml version="1.0"?>
<robot name="mixed">
  <link name="base"/><link name="a"/><link name="b"/><link name="c"/><link name="d"/>
  <link name="e"/><link name="tip"/><link name="side"/>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="a"/>
    <origin xyz="0.1 0 0.2" rpy="0.3 0 0"/><axis xyz="0 0 2"/>
    <limit lower="-0.2" upper="0.4" velocity="0.5" effort="1"/></joint>
  <joint name="spin" type="continuous"><parent link="a"/><child link="b"/>
    <origin xyz="0 0.3 0" rpy="0 0.5 0.1"/><axis xyz="1 1 0"/></joint>
  <joint name="bend" type="revolute"><parent link="b"/><child link="c"/>
    <origin xyz="0.25 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
  <joint name="follow" type="revolute"><parent link="c"/><child link="d"/>
    <origin xyz="0.2 0 0.05" rpy="0.2 -0.1 0.4"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" velocity="1" effort="1"/>
    <mimic joint="bend" multiplier="-0.5" offset="0.1"/></joint>
  <joint name="weld" type="fixed"><parent link="d"/><child link="e"/>
    <origin xyz="0 0 0.1" rpy="1.0 0 0"/></joint>
  <joint name="twist" type="revolute"><parent link="e"/><child link="tip"/>
    <origin xyz="0.05 0.05 0.05" rpy="0 0 0"/><axis xyz="0.2 -0.3 0.9"/>
    <limit lower="-3" upper="3" velocity="2" effort="1"/></joint>
  <joint name="other" type="revolute"><parent link="base"/><child link="side"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" velocity="1" effort="1"/></joint>
</robot>
"""


def reference_forward(xml, base, tip, values):
    """Independent FK: walk urdf_parser_py's objects with transforms3d.

    ``values`` maps every movable joint name to its value (mimic included).
    """
    robot = urdf_module.URDF.from_xml_string(xml)
    by_child = {j.child: j for j in robot.joints}
    path, link = [], tip
    while link != base:
        path.append(by_child[link])
        link = by_child[link].parent
    t = np.eye(4)
    for joint in reversed(path):
        xyz = joint.origin.xyz if joint.origin is not None else [0, 0, 0]
        rpy = joint.origin.rpy if joint.origin is not None else [0, 0, 0]
        origin = transforms3d.affines.compose(
            xyz, transforms3d.euler.euler2mat(*rpy, axes='sxyz'), [1, 1, 1])
        motion = np.eye(4)
        if joint.type in ('revolute', 'continuous'):
            motion[:3, :3] = transforms3d.axangles.axangle2mat(joint.axis, values[joint.name])
        elif joint.type == 'prismatic':
            axis = np.array(joint.axis) / np.linalg.norm(joint.axis)
            motion[:3, 3] = axis * values[joint.name]
        t = t @ origin @ motion
    return t


def random_q(chain, rng):
    """Draw joints uniformly within limits (continuous: within +-pi)."""
    lo = np.where(np.isfinite(chain.lower), chain.lower, -np.pi)
    hi = np.where(np.isfinite(chain.upper), chain.upper, np.pi)
    return rng.uniform(lo, hi)
