# SPDX-License-Identifier: Apache-2.0

"""The motion tracker as the tests drive it: arms at a start, a judge of the limits, arrival."""

import functools
import math

from ik_node import Chain
from ik_node.core.ik.factory import make_solver
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from models import ROOT
import numpy as np
from oracle import RawModel

ARMS = {
    'iiwa14': ('iiwa14.urdf', 'iiwa_link_0', 'tool0', [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]),
    'ur5e': ('ur5e.urdf', 'base_link', 'tool0', [0.3, -1.2, 1.5, -1.9, -1.57, 0.2]),
}
# Generous solver budget: the tests judge the policy, not the solver's speed
# (with a deadline, what a solve finds would depend on this machine's load).
BUDGET = 1.0
# Relative slack for floating-point rounding of the limits.
EPS = 1e-9


def load(name):
    """Return (chain, urdf text, q0) of a bundled arm."""
    file, base, tip, q0 = ARMS[name]
    path = ROOT / 'urdf' / file
    return Chain.from_urdf_file(str(path), base, tip), path.read_text(), np.array(q0)


CHAINS = {name: load(name) for name in ARMS}


def tracker_for(name, **config):
    """Return a tracker on a bundled arm at its q0, time 0."""
    chain, _, q0 = CHAINS[name]
    cfg = TrackerConfig(ik_timeout=BUDGET, **config)
    return MotionTracker(chain, make_solver(chain, 'auto'), cfg, q0, 0.0)


class Judge:
    """Checks every consecutive pair of commands against the limits in force."""

    def __init__(self, tracker):
        """Start from the tracker's current command."""
        self.tracker = tracker
        self.chain = tracker.chain
        self.last = tracker.command_now()
        self.count = 0

    def __call__(self, cmd, accel=None):
        """Check one new command (accel: the acceleration limits (n,) in force)."""
        chain, last = self.chain, self.last
        a = np.array(accel if accel is not None else self.tracker.config.accelerations(chain.n))
        assert np.all(np.isfinite(cmd.q)) and np.all(np.isfinite(cmd.v))
        assert chain.within_limits(cmd.q)
        dt = cmd.time - last.time
        if dt > 0.0:
            rounding = 4.0 * np.finfo(float).eps * np.maximum(1.0, np.abs(cmd.q)) / dt
            assert np.all(np.abs(cmd.v) <= chain.velocity * (1 + EPS) + rounding)
            assert np.all(np.abs(cmd.v - last.v) <= a * dt * (1 + EPS) + 2 * rounding)
            np.testing.assert_allclose(cmd.v, (cmd.q - last.q) / dt, rtol=1e-9, atol=1e-9)
        else:
            np.testing.assert_array_equal(cmd.q, last.q)
        self.last = cmd
        self.count += 1


@functools.lru_cache(maxsize=8)
def raw_model(xml):
    """Read the description's XML once with the independent reader (oracle.RawModel)."""
    return RawModel(xml)


def arrives(tracker, judge, target, xml, base, tip, t, timeout_s=40.0, dt=0.01):
    """Command until the tip is on target (independent FK); return the time it took.

    On target is within 1 um and 1 urad, the arm still; with a preferred
    posture it may go on drifting toward it in the null space (at
    ``posture_rate``, which takes minutes at a low rate): then the tip on
    target, every joint within that rate, is arrival.
    """
    chain, model = tracker.chain, raw_model(xml)
    start = t
    while t - start < timeout_s:
        t += dt
        judge(tracker.command(t))
        tracker.check_reachability()
        pose = model.pose(base, tip, dict(zip(chain.joint_names, judge.last.q)))
        rot = pose[:3, :3].T @ target[:3, :3]
        angle = math.atan2(0.5 * np.linalg.norm([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0],
                                                 rot[1, 0] - rot[0, 1]]),
                           0.5 * (np.trace(rot) - 1.0))
        config = tracker.config
        drift = config.posture_rate * (1 + EPS) if config.posture else 0.0
        if np.linalg.norm(pose[:3, 3] - target[:3, 3]) < 1e-6 and angle < 1e-6 and \
                np.all(np.abs(judge.last.v) <= drift):
            return t - start
    return None


def reachable_target(chain, rng, q0, spread):
    """Return the tip pose of joints near q0 within the limits: reachable by construction."""
    q = np.clip(q0 + rng.uniform(-spread, spread, chain.n), chain.lower, chain.upper)
    return chain.forward(q)
