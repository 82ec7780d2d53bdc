# SPDX-License-Identifier: Apache-2.0

"""ik_node: inverse kinematics for robot arms, with a ROS 2 node on top.

The package root re-exports the stable public API (see the README). The
mathematics lives in :mod:`ik_node.core` (pure numpy, no ROS imports); the
ROS 2 node lives in :mod:`ik_node.ros`.
"""

import importlib

# Public name -> the module that defines it. Imported on first use (PEP 562):
# importing the package itself costs nothing, so the ik_node executable
# (ik_node.ros.entry) installs its signal handlers before numpy, rclpy or
# the kernels load; a Ctrl-C while they import is then counted, not a traceback.
_PUBLIC = {
    'AnalyticOffsetWrist': 'ik_node.core.ik.closed_form.offset_wrist',
    'AnalyticSRS': 'ik_node.core.ik.closed_form.srs',
    'Chain': 'ik_node.core.model.chain',
    'EndEffector': 'ik_node.core.ik.stacked',
    'IKError': 'ik_node.core.errors',
    'IKResult': 'ik_node.core.ik.base',
    'InvalidInputError': 'ik_node.core.errors',
    'JacobianIK': 'ik_node.core.ik.jacobian',
    'Joint': 'ik_node.core.model.chain',
    'make_solver': 'ik_node.core.ik.factory',
    'ModelError': 'ik_node.core.errors',
    'MotionSession': 'ik_node.core.motion.session',
    'MotionTracker': 'ik_node.core.motion.tracker',
    'spherical_cubic_interpolate_in_time': 'ik_node.core.motion.smoothing',
    'StackedIK': 'ik_node.core.ik.stacked',
    'Task': 'ik_node.core.ik.task',
    'TrackerConfig': 'ik_node.core.motion.tracker',
    'ZeroNormError': 'ik_node.core.errors',
}

__all__ = sorted(_PUBLIC, key=str.lower)


def __getattr__(name):
    """Import a public name's module on first use (``from ik_node import Chain``)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ik_node' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    """List the public names with the module's own."""
    return sorted(set(globals()) | set(_PUBLIC))
