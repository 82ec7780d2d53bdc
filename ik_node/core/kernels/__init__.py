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

"""Everything numba compiles: plain Python in the numba subset, and the machinery that compiles it.

``base`` (3-vectors, 3x3 matrices as 9-tuples, quaternions, chain kinematics),
``srs`` and ``offset_wrist`` (the closed forms at one swivel angle / one q7),
``limits`` (the limiting step), ``lm`` (the compiled Levenberg-Marquardt
descent); ``compile`` clones and compiles them, ``backend`` picks numpy or
numba. Importing this package imports nothing (the core runs without numba).
"""
