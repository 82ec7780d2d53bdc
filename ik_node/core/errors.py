# SPDX-License-Identifier: Apache-2.0

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
