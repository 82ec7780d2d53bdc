#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write urdf/iiwa14_dual.urdf: two of the bundled iiwa14 arms on a lifting torso (a demo robot).

The arms are urdf/iiwa14.urdf's links and joints, each name prefixed left_ or
right_, mounted upright 0.7 m apart on a torso that a prismatic joint lifts
0.3 m on a pedestal. Run from the repository's root: python3 scripts/make_dual_iiwa.py
"""

from pathlib import Path
import re

ROOT = Path(__file__).resolve().parents[1]
HEADER = """<?xml version="1.0"?>
<!--
  Two of ik_node's iiwa14 arms (urdf/iiwa14.urdf: kinematics of the KUKA LBR iiwa 14 R820,
  ROS-Industrial's collision meshes) on a torso lifted 0 to 0.3 m by a prismatic joint, on a
  pedestal: a demo robot for several end effectors (two arms sharing a torso joint). Written
  by scripts/make_dual_iiwa.py for ik_node; not a KUKA product.
-->
<robot name="iiwa14_dual">
  <material name="grey"><color rgba="0.7 0.7 0.72 1"/></material>
  <material name="orange"><color rgba="1.0 0.45 0.0 1"/></material>
  <material name="white"><color rgba="0.92 0.92 0.92 1"/></material>
  <material name="dark"><color rgba="0.25 0.25 0.28 1"/></material>
  <link name="world"/>
  <joint name="world_joint" type="fixed"><parent link="world"/><child link="base"/><origin xyz="0 0 0" rpy="0 0 0"/></joint>
  <link name="base">
    <visual><origin xyz="0 0 0.35" rpy="0 0 0"/><geometry><box size="0.3 0.3 0.7"/></geometry><material name="dark"/></visual>
    <collision><origin xyz="0 0 0.35" rpy="0 0 0"/><geometry><box size="0.3 0.3 0.7"/></geometry></collision>
  </link>
  <link name="torso">
    <visual><origin xyz="0 0 -0.05" rpy="0 0 0"/><geometry><box size="0.25 0.95 0.1"/></geometry><material name="grey"/></visual>
    <collision><origin xyz="0 0 -0.05" rpy="0 0 0"/><geometry><box size="0.25 0.95 0.1"/></geometry></collision>
  </link>
  <joint name="torso_lift_joint" type="prismatic">
    <parent link="base"/>
    <child link="torso"/>
    <origin xyz="0 0 0.8" rpy="0 0 0"/>
    <axis xyz="0 0 1"/>
    <limit lower="0.0" upper="0.3" effort="1000" velocity="0.1"/>
  </joint>
"""
MOUNT = """  <joint name="{side}_mount" type="fixed"><parent link="torso"/><child link="{side}_iiwa_link_0"/><origin xyz="0 {y} 0" rpy="0 0 0"/></joint>
"""


def arm(text: str, side: str) -> str:
    """Return iiwa14.urdf's links and joints (no world, no materials), names prefixed."""
    body = text[text.index('<link name="iiwa_link_0">'):text.rindex('</robot>')]
    body = re.sub(r'(name|link)="(iiwa_[a-z_0-9]+|tool0)"', rf'\1="{side}_\2"', body)
    return body


def main() -> None:
    text = (ROOT / 'urdf' / 'iiwa14.urdf').read_text()
    out = HEADER
    for side, y in (('left', 0.35), ('right', -0.35)):
        out += MOUNT.format(side=side, y=y) + arm(text, side)
    (ROOT / 'urdf' / 'iiwa14_dual.urdf').write_text(out + '</robot>\n')


if __name__ == '__main__':
    main()
