# SPDX-License-Identifier: Apache-2.0

"""Descriptions the tests share: malformed files with the reason each is refused, a xacro file."""

from models import ROOT, URDF_CORPUS  # noqa: F401 - ROOT re-exported for the URDF tests

# The malformed descriptions' folder.
CORPUS = URDF_CORPUS
# (file in CORPUS, base link, tip link, the reason's pattern).
CASES = [
    ('not_xml.urdf', 'base', 'tip', 'cannot parse'),
    ('cycle.urdf', 'base', 'b', 'two parent joints'),
    ('cycle_detached.urdf', 'base', 'b', 'the joints form a cycle through link'),
    ('two_roots.urdf', 'base', 'a', r'2 root links \(base, island\)'),
    ('tip_not_below_base.urdf', 'left', 'right', "tip_link 'right' is not below base_link 'left'"),
    ('zero_axis.urdf', 'base', 'tip', r"joint 'j0': axis \[0.0, 0.0, 0.0\] has zero length"),
    ('nan_axis.urdf', 'base', 'tip', "joint 'j0': axis must be 3 finite numbers"),
    ('nan_origin.urdf', 'base', 'tip', "joint 'j0': origin xyz/rpy must be 3 finite numbers"),
    ('lower_above_upper.urdf', 'base', 'tip', 'lower limit 1.5 is above upper limit -1.5'),
    ('mimic_nowhere.urdf', 'base', 'tip', "mimics 'ghost', which is not a free movable joint"),
    ('no_movable_joints.urdf', 'base', 'tip', 'has no movable joints'),
    ('xxe_local_file.urdf', 'base', 'tip', 'DOCTYPE / ENTITY declaration was found'),
    ('entity_bomb.urdf', 'base', 'tip', 'DOCTYPE / ENTITY declaration was found'),
    ('unsupported_joint_type.urdf', 'base', 'tip', "type 'floating' is not supported"),
    ('joint_to_missing_link.urdf', 'base', 'tip', "refers to link 'elsewhere'"),
]

XACRO = """<?xml version="1.0"?>
<robot name="two_link" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:arg name="prefix" default=""/>
  <xacro:property name="upper" value="0.4"/>
  <xacro:property name="prefix" value="$(arg prefix)"/>
  <xacro:macro name="link_with_mesh" params="name">
    <link name="${prefix}${name}">
      <visual><geometry>
        <mesh filename="package://no_such_package/meshes/${name}.stl"/></geometry></visual>
      <collision><geometry>
        <mesh filename="file:///no/such/dir/${name}.dae"/></geometry></collision>
    </link>
  </xacro:macro>
  <xacro:link_with_mesh name="base"/>
  <xacro:link_with_mesh name="upper_arm"/>
  <xacro:link_with_mesh name="tool"/>
  <joint name="${prefix}shoulder" type="revolute">
    <parent link="${prefix}base"/><child link="${prefix}upper_arm"/>
    <origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-2" upper="2" velocity="1" effort="1"/>
  </joint>
  <joint name="${prefix}elbow" type="revolute">
    <parent link="${prefix}upper_arm"/><child link="${prefix}tool"/>
    <origin xyz="${upper} 0 0" rpy="0 ${pi / 2} 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" velocity="1" effort="1"/>
  </joint>
</robot>
"""
