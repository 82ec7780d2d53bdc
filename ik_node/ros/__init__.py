# SPDX-License-Identifier: Apache-2.0

"""ROS 2 layer of ik_node: the node, message <-> numpy conversion, parameters.

rclpy and message types are imported here and by the benchmarks that drive
the node over DDS (ik_node.bench), never by ik_node.core or ik_node.description.urdf; this
layer imports nothing from ik_node.bench (test_core_isolation checks the
import directions).
"""
