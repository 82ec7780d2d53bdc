# SPDX-License-Identifier: Apache-2.0
"""The arms the task tests run on (issue 52), judged by their raw descriptions' FK.

The SO-101 (5 joints, test/urdf_corpus/external, written by others), the
bundled UR5e (6) and iiwa14 (7): their chains, the oracle's tip pose, and
the small geometry the tests judge with.
"""

from ik_node import Chain
from models import ARMS, URDF_CORPUS
import numpy as np
from oracle import RawModel

SO101 = (URDF_CORPUS / 'external' / 'so101_new_calib.urdf', 'base_link', 'gripper_frame_link')
FILES = {'so101': SO101, 'ur5e': ARMS['ur5e'], 'iiwa14': ARMS['iiwa14']}
XML = {name: path.read_text() for name, (path, _, _) in FILES.items()}
CHAINS = {name: Chain.from_urdf_string(XML[name], base, tip)
          for name, (_, base, tip) in FILES.items()}
RAW = {name: RawModel(xml) for name, xml in XML.items()}
BACKENDS = ['numba', 'numpy']


def oracle_tip(name, q):
    """Return the tip pose (4, 4) at joints q by the raw description."""
    chain = CHAINS[name]
    return RAW[name].pose(chain.base_link, chain.tip_link, dict(zip(chain.joint_names, q)))


def angle(u, v):
    """Return the angle between two vectors, rad."""
    u, v = np.asarray(u) / np.linalg.norm(u), np.asarray(v) / np.linalg.norm(v)
    return float(np.arctan2(np.linalg.norm(np.cross(u, v)), u @ v))


def inside(chain, rng, shrink=0.1):
    """Return joints drawn inside the limits, ``shrink`` of each range off either end."""
    pad = shrink * (chain.upper - chain.lower)
    return rng.uniform(chain.lower + pad, chain.upper - pad)
