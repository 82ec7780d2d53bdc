# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""ik_node: inverse kinematics for robot arms, with a ROS 2 node on top.

The package root re-exports the stable public API (see the README). The
mathematics lives in :mod:`ik_node.core` (pure numpy, no ROS imports); the
ROS 2 node lives in :mod:`ik_node.ros`.
"""

from ik_node.core.errors import IKError, InvalidInputError, ModelError, ZeroNormError
from ik_node.core.ik.base import IKResult
from ik_node.core.ik.closed_form.offset_wrist import AnalyticOffsetWrist
from ik_node.core.ik.closed_form.srs import AnalyticSRS
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.core.model.chain import Chain, Joint
from ik_node.core.motion.smoothing import spherical_cubic_interpolate_in_time
from ik_node import urdf  # noqa: F401,I100 - registers the URDF reader of Chain.from_urdf_*

__all__ = ['AnalyticOffsetWrist', 'AnalyticSRS', 'Chain', 'IKError', 'IKResult',
           'InvalidInputError', 'JacobianIK', 'Joint', 'ModelError',
           'spherical_cubic_interpolate_in_time', 'ZeroNormError']
