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

"""Exception hierarchy of ik_node: one root, a few specific subclasses.

Every error the package raises on purpose derives from :class:`IKError`, so a
caller (the ROS node, a script) can catch one type and report its message.
Messages say what was received, what was expected and, where there is a
finite set, the valid choices.
"""


class IKError(Exception):
    """Root of every error raised by ik_node on purpose."""


class InvalidInputError(IKError, ValueError):
    """An argument has the wrong shape, a non-finite value or is out of range."""


class ZeroNormError(InvalidInputError):
    """A quaternion (or axis) is too close to zero to define a rotation."""


class ModelError(IKError):
    """A robot model (URDF, chain) is malformed or unsuitable for a solver."""
