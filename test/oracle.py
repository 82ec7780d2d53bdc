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

"""The tests' forward kinematics: independent of ik_node's kernels and rotations.

Each joint's URDF record (origin, axis, type, mimic) is composed in turn with
transforms3d's axis-angle matrices, the way the URDF specification reads, not
through the chain's precomputed tables. test_chain pins Chain's records
against the raw URDF (its own reference_forward).
"""

import numpy as np
import transforms3d


def forward(chain, q):
    """Tip pose (4, 4) of joints q (n,) in chain order, base frame."""
    values = dict(zip(chain.joint_names, np.asarray(q, dtype=float)))
    t = np.eye(4)
    for joint in chain.joints:
        motion = np.eye(4)
        if joint.type != 'fixed':
            if joint.mimic is not None:
                leader, mult, offset = joint.mimic
                value = mult * values[leader] + offset
            else:
                value = values[joint.name]
            axis = np.asarray(joint.axis, dtype=float)
            if joint.type == 'prismatic':
                motion[:3, 3] = value * axis / np.linalg.norm(axis)
            else:
                motion[:3, :3] = transforms3d.axangles.axangle2mat(axis, value)
        t = t @ joint.origin @ motion
    return t


def pose_errors(chain, q, target):
    """Position (m) and angle (rad) of q's tip from target (4, 4), by this FK."""
    tip = forward(chain, q)
    r = tip[:3, :3].T @ target[:3, :3]
    sin = 0.5 * np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    return float(np.linalg.norm(tip[:3, 3] - target[:3, 3])), \
        float(np.arctan2(sin, (np.trace(r) - 1) / 2))


def expm(a):
    """Matrix exponential of a square matrix by scaling and squaring of its Taylor series.

    Independent of ik_node's closed forms (Rodrigues, the SE(3) V matrix):
    halve until the norm is below 0.5, sum 30 terms, square back.
    """
    a = np.asarray(a, dtype=float)
    norm = np.linalg.norm(a, ord=np.inf)
    squarings = max(0, int(np.ceil(np.log2(norm / 0.5)))) if norm > 0.5 else 0
    scaled = a / 2.0 ** squarings
    term, total = np.eye(len(a)), np.eye(len(a))
    for k in range(1, 30):
        term = term @ scaled / k
        total = total + term
    for _ in range(squarings):
        total = total @ total
    return total


def hat(w):
    """Return the skew matrix (3, 3) of w (3,), the cross product with w as a matrix."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def twist_matrix(v, w):
    """Return the 4x4 se(3) matrix of a twist: linear v (3,), angular w (3,)."""
    m = np.zeros((4, 4))
    m[:3, :3] = hat(w)
    m[:3, 3] = v
    return m
