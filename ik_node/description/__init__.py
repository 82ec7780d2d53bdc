# SPDX-License-Identifier: Apache-2.0

"""Robot descriptions as users have them, read for the core, the node and the viewer.

URDF and xacro into chains and link frames (:mod:`.urdf`); their
``<collision>`` geometry, SRDF pairs and obstacle files (:mod:`.geometry`);
their ``<visual>`` shapes and meshes (:mod:`.visuals`). Above the core
(which :mod:`.urdf` registers itself with as the URDF reader), below the ROS
layer and the benches.
"""
