# SPDX-License-Identifier: Apache-2.0

"""Pure-numpy core of ik_node: rotations, kinematics, solvers, smoothing, motion.

The folders follow the data flow, each importing only those before it:
``kernels`` (everything numba compiles, and the compiling) -> ``model`` (the
chain, link frames) -> ``ik`` (solvers) -> ``motion`` (the tracker, the
command stream, feedback); ``errors``, ``rotations`` and ``poses`` (the pose
containers and the pose error) serve them all.

Nothing under this package imports rclpy, ROS message types, urdf_parser_py
or the ik_node layers above it (urdf, ros, bench): ik_node.description.urdf registers
itself as the reader behind Chain.from_urdf_*. It runs with numpy alone;
numba, when installed, compiles its kernels (tests enforce both).
"""
