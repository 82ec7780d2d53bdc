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

"""Target paths in plain numpy: the demo's figure-eight (ik_demo streams it; tests replay it)."""

from ik_node.core.rotations import axis_angle_to_quaternion, multiply
import numpy as np


def figure_eight(t, center, size, period):
    """Target pose (position (3,) m, quaternion (4,) x-y-z-w) of a lemniscate at time t, s.

    ``center`` (3,) m and ``size`` m in the base frame, ``period`` s: the tool
    points down and rocks about x by up to 0.35 rad.
    """
    a = 2.0 * np.pi * t / period
    p = center + size * np.array([0.0, np.sin(a), np.sin(a) * np.cos(a)])
    down = axis_angle_to_quaternion([0.0, 1.0, 0.0], np.pi)  # tool pointing down
    rock = axis_angle_to_quaternion([1.0, 0.0, 0.0], 0.35 * np.sin(a))
    return p, multiply(rock, down)
