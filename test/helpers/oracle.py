# SPDX-License-Identifier: Apache-2.0

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


class RawModel:
    """A robot description read straight from its XML, for link poses (another reader).

    Only xml.etree and transforms3d: none of urdf_parser_py, ik_node.description.urdf or
    the chain's tables. ``pose(base, link, values)`` walks the tree from the
    base up to the common ancestor and down to the link, composing each
    joint's origin (rpy as URDF defines it: fixed-axis roll, pitch, yaw) and
    motion; ``values`` maps movable joint names to values, a mimic joint
    taking ``multiplier * leader + offset`` (urdfdom's defaults 1 and 0).
    """

    def __init__(self, xml):
        """Index the joints by child link."""
        from xml.etree import ElementTree
        root = ElementTree.fromstring(xml)
        self.links = [e.get('name') for e in root.findall('link')]
        self.joints = {}
        for e in root.findall('joint'):
            origin, axis, mimic = e.find('origin'), e.find('axis'), e.find('mimic')
            self.joints[e.find('child').get('link')] = {
                'name': e.get('name'), 'type': e.get('type'),
                'parent': e.find('parent').get('link'),
                'xyz': _floats(origin, 'xyz'), 'rpy': _floats(origin, 'rpy'),
                'axis': _floats(axis, 'xyz', '1 0 0'),
                'mimic': None if mimic is None else (
                    mimic.get('joint'), float(mimic.get('multiplier', 1.0)),
                    float(mimic.get('offset', 0.0)))}

    def ancestors(self, link):
        """Return [link, its parent, ..., the root]."""
        out = [link]
        while out[-1] in self.joints:
            out.append(self.joints[out[-1]]['parent'])
        return out

    def joints_between(self, base, link):
        """Return (joints from base up to the common ancestor, joints from it down to link)."""
        up, down = self.ancestors(base), self.ancestors(link)
        common = next(a for a in up if a in down)
        return ([self.joints[a] for a in up[:up.index(common)]],
                [self.joints[a] for a in reversed(down[:down.index(common)])])

    def joint_value(self, joint, values):
        """Return a movable joint's value from ``values`` (a mimic: from its leader)."""
        if joint['mimic'] is not None:
            leader, mult, offset = joint['mimic']
            return mult * values[leader] + offset
        return values[joint['name']]

    def local(self, joint, values):
        """Return the (4, 4) pose of a joint's child link in its parent link."""
        import transforms3d
        t = np.eye(4)
        t[:3, :3] = transforms3d.euler.euler2mat(*joint['rpy'], axes='sxyz')
        t[:3, 3] = joint['xyz']
        motion = np.eye(4)
        if joint['type'] != 'fixed':
            value, axis = self.joint_value(joint, values), np.array(joint['axis'])
            if joint['type'] == 'prismatic':
                motion[:3, 3] = value * axis / np.linalg.norm(axis)
            else:
                motion[:3, :3] = transforms3d.axangles.axangle2mat(axis, value)
        return t @ motion

    def pose(self, base, link, values):
        """Return the (4, 4) pose of ``link`` in ``base`` at joint values (name -> value)."""
        up, down = self.joints_between(base, link)
        t_common_base = np.eye(4)
        for joint in reversed(up):
            t_common_base = t_common_base @ self.local(joint, values)
        t_common_link = np.eye(4)
        for joint in down:
            t_common_link = t_common_link @ self.local(joint, values)
        return np.linalg.inv(t_common_base) @ t_common_link


def _floats(element, attribute, default='0 0 0'):
    """Return an XML attribute's three numbers (the default when the element or it is absent)."""
    text = default if element is None else element.get(attribute, default)
    return [float(v) for v in text.split()]
