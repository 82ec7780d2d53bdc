# SPDX-License-Identifier: Apache-2.0

"""Bring up a bundled robot: robot_state_publisher, ik_node and (optionally) RViz.

ik_node publishes joint_states itself, so no joint_state_publisher runs.
Arguments: robot (iiwa14, panda, ur5e, xarm7, or iiwa14_dual: two arms on a
lifting torso, driven at both hands by one node; a file pair urdf/<robot>.urdf
and config/<robot>.yaml), rviz (true/false), viewer (true/false: ik_viewer, the
arm in a browser, instead of or beside RViz; needs viser), namespace, params_file (more
ik_node parameters, applied after the robot's: e.g.
config/ros2_control/ik_node_joint_trajectory.yaml to read the robot's joint
states and command its ros2_control controller; then the robot's
joint_state_broadcaster, not ik_node, publishes joint_states).

Every executable is looked up before anything starts: a missing one (rviz2
on a machine without it, say) stops the launch with one line naming it,
instead of failing after the other nodes are already running.
"""

import os

from ament_index_python.packages import get_package_prefix, get_package_share_directory, \
    PackageNotFoundError
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _missing_executables(wanted):
    """Return 'package/executable' for each (package, executable) not installed."""
    missing = []
    for package, executable in wanted:
        try:
            path = os.path.join(get_package_prefix(package), 'lib', package, executable)
        except PackageNotFoundError:
            path = None
        if path is None or not os.access(path, os.X_OK):
            missing.append(f'{package}/{executable}')
    return missing


def _robot_nodes(context):
    share = get_package_share_directory('ik_node')
    robot = LaunchConfiguration('robot').perform(context)
    urdf = os.path.join(share, 'urdf', f'{robot}.urdf')
    config = os.path.join(share, 'config', f'{robot}.yaml')
    if not (os.path.isfile(urdf) and os.path.isfile(config)):
        known = sorted(f[:-5] for f in os.listdir(os.path.join(share, 'config'))
                       if f.endswith('.yaml')
                       and os.path.isfile(os.path.join(share, 'urdf', f[:-5] + '.urdf')))
        raise RuntimeError(f"robot '{robot}' is not bundled; choose one of {', '.join(known)}")
    params_file = LaunchConfiguration('params_file').perform(context)
    if params_file and not os.path.isfile(params_file):
        raise RuntimeError(f'params_file: no such file: {params_file}')
    with open(urdf, encoding='utf-8') as handle:
        description = handle.read()
    namespace = LaunchConfiguration('namespace').perform(context)
    rviz = IfCondition(LaunchConfiguration('rviz'))
    wanted = [('robot_state_publisher', 'robot_state_publisher'), ('ik_node', 'ik_node')]
    viewer = IfCondition(LaunchConfiguration('viewer'))
    if rviz.evaluate(context):
        wanted.append(('rviz2', 'rviz2'))
    if viewer.evaluate(context):
        wanted.append(('ik_node', 'ik_viewer'))
    missing = _missing_executables(wanted)
    if missing:
        hint = ' (or launch with rviz:=false)' if 'rviz2/rviz2' in missing else ''
        raise RuntimeError(f"nothing started: not installed: {', '.join(missing)}; install "
                           f'{"it" if len(missing) == 1 else "them"}{hint}')
    return [
        Node(package='robot_state_publisher', executable='robot_state_publisher',
             namespace=namespace, parameters=[{'robot_description': description}],
             output='screen'),
        Node(package='ik_node', executable='ik_node', name='ik_node', namespace=namespace,
             parameters=[config, *([params_file] if params_file else []),
                         {'robot_description': description,
                          'obstacles_file': os.path.join(share, 'config', 'obstacles',
                                                         'floor.yaml')}], output='screen'),
        Node(package='rviz2', executable='rviz2', namespace=namespace,
             arguments=['-d', os.path.join(share, 'rviz', 'ik_node.rviz')],
             condition=rviz, output='screen'),
        Node(package='ik_node', executable='ik_viewer', namespace=namespace,
             arguments=['--namespace', namespace] if namespace else [],
             condition=viewer, output='screen'),
    ]


def generate_launch_description():
    """Return the launch description (see the module docstring)."""
    return LaunchDescription([
        DeclareLaunchArgument('robot', default_value='iiwa14',
                              description='bundled robot: iiwa14 (SRS, analytic), panda, ur5e, '
                                          'xarm7 or iiwa14_dual (two arms, one torso)'),
        DeclareLaunchArgument('rviz', default_value='true', description='start RViz'),
        DeclareLaunchArgument('viewer', default_value='false',
                              description='start ik_viewer (the arm in a browser; needs viser)'),
        DeclareLaunchArgument('namespace', default_value='', description='namespace'),
        DeclareLaunchArgument('params_file', default_value='',
                              description='more ik_node parameters (YAML), applied after '
                                          "the robot's config"),
        OpaqueFunction(function=_robot_nodes),
    ])
