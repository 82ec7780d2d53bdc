# SPDX-License-Identifier: Apache-2.0

"""The workspace sphere: targets far beyond an arm's reach pulled onto it (base frame, metres)."""

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Targets farther from the base than this times the chain's reach bound are
# pulled onto that sphere (they are out of reach either way, and a target a
# kilometre off would keep the trajectory busy for hours).
WORKSPACE_MARGIN = 1.25


class WorkspaceSphere:
    """A sphere about the chain's base of WORKSPACE_MARGIN x its reach bound (m).

    Attributes:
        radius: the sphere's radius, m.
        clamped: targets pulled onto it so far.

    """

    def __init__(self, reach: float):
        """Bound targets for an arm that reaches at most ``reach`` metres from its base."""
        self.radius = WORKSPACE_MARGIN * float(reach)
        self.clamped = 0

    def __call__(self, target: FloatArray) -> FloatArray:
        """Return ``target`` (4, 4, changed in place) with its origin pulled within the sphere."""
        distance = float(np.linalg.norm(target[:3, 3]))
        if distance > self.radius:
            self.clamped += 1
            target[:3, 3] *= self.radius / distance
        return target
