# SPDX-License-Identifier: Apache-2.0
"""A guarded motion session the collision tests drive, every sample of its plan checked.

:class:`Run` is the node's motion step on a bundled arm with a collision
guard, ticked at 250 Hz; the committed command is sampled at 1 kHz (a
controller's rate) and every sample's pairs are checked against their
floor (the margin, or, for a pair inside it at the start, where it was);
:func:`certify` has the test oracle (geometry_oracle: closed forms, branch
and bound, the oracle's own FK) certify the closest samples.
"""

from geometry_oracle import distance_interval, RobotSolids
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.stream import controller_lead
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.description.geometry import collision_model
from models import ARMS, HOME
import numpy as np
from oracle import RawModel

MARGIN = 0.01
SLACK = 1e-3      # the guarantee: >= MARGIN - SLACK at every sample
PERIOD = 0.004    # the node's grid (250 Hz)
HARDWARE = 0.001  # the controller's rate (1 kHz)
JERK = 500.0
# Obstacles keep this clearance from the arm at home (an arm started inside
# the margin is tested by test_collision's guard tests and test_an_arm_...).
HOME_CLEARANCE = MARGIN + 0.03
# Samples between two grid instants are checked when a pair is this close (m)
# at the grid instant before or after.
NEAR_GRID = 0.04

MODELS = {}


def arm_model(arm):
    """Return (chain, xml, model) of a bundled arm (cached: building samples contacts)."""
    if arm not in MODELS:
        path, base, tip = ARMS[arm]
        xml = path.read_text()
        chain = Chain.from_urdf_string(xml, base, tip)
        model, _ = collision_model(xml, chain, home=HOME[arm])
        MODELS[arm] = (chain, xml, model)
    return MODELS[arm]


class Run:
    """A session whose tracker has a guard; every sample of its plan has its distances checked."""

    def __init__(self, arm, model, chain, q0, smoothing, slack_inside=SLACK):
        """Start at q0, time 0; a pair inside the margin at q0 may go slack_inside (m) deeper."""
        # A short solver budget: the guard is judged here, not the IK.
        config = TrackerConfig(ik_timeout=0.005, smoothing=smoothing)
        solver = make_solver(chain, 'auto')
        solver.warm_up(np.asarray(q0, dtype=float))   # as the node does before its first tick
        self.tracker = MotionTracker(chain, solver, config, q0, 0.0)
        self.guard = CollisionGuard(model, MARGIN)
        self.tracker.guard = self.guard
        # The node's motion step: inputs and ticks through the session.
        self.session = MotionSession(self.tracker, PERIOD, controller_lead(PERIOD, 0.03), JERK,
                                     budget_s=0.03)
        self.stream = self.session.plan   # what the controller samples
        self.model, self.chain = model, chain
        # A pair inside the margin at the start may stay there, never closer
        # (the guard lets it out, never further in): its floor is where it was.
        start = model.distances(np.asarray(q0, dtype=float), MARGIN)
        self.floor = {int(p): min(MARGIN, float(d)) for p, d in zip(start.pairs, start.distance)}
        self.slack = {p: slack_inside for p, d in self.floor.items() if d < MARGIN}
        self.now = 0.0
        self.checked_to = 0.0
        self._start_near = True
        self.closest = []   # (distance, time, q) of the closest samples

    @property
    def blocked(self):
        """Return what holds the arm now (the step's HoldReport: a guard.Blocked), or None."""
        return self.tracker.stepper.report.blocked

    def certify(self, xml):
        """Certify the run's closest samples by the oracle (:func:`certify`); none: nothing."""
        if self.closest:
            certify(xml, self.chain, self.model, self.closest, self.floor)

    def go(self, seconds, until=None):
        """Advance the clock in node ticks for ``seconds`` (or until ``until()``)."""
        start, end = self.now, self.now + seconds
        while self.now < end and not (until and self.now > start + 0.2 and until()):
            self.now += PERIOD
            self.session.tick(self.now)
            self._check_samples(self.now)

    def _check_samples(self, upto):
        """Check the committed command at 1 kHz up to ``upto`` (s), one grid period at a time.

        Distances are computed at every grid instant; the samples between two
        grid instants are checked when either end has a pair within NEAR_GRID
        (the cubic moves the arm at most ~3 cm per period at full speed).
        """
        steps = int(round(PERIOD / HARDWARE))
        while self.checked_to + PERIOD <= upto + 1e-9:
            start = self.checked_to
            end_near = self._check(start + PERIOD, NEAR_GRID)
            if end_near or self._start_near:
                for k in range(1, steps):
                    self._check(start + k * HARDWARE, 0.005)
            self._start_near = end_near
            self.checked_to = start + PERIOD

    def _check(self, t, band):
        """Check the sample at t; return whether a pair is within ``band`` of the margin."""
        c = self.chain
        q, v, _ = self.stream.sample(t)
        assert np.all(np.isfinite(q)) and c.within_limits(q, 1e-9)
        assert np.all(np.abs(v) <= c.velocity * (1 + 1e-6) + 1e-9)
        near = self.model.distances(q, MARGIN + band)
        for p, d in zip(near.pairs, near.distance):
            floor = self.floor.get(int(p), MARGIN)
            slack = self.slack.get(int(p), SLACK)
            assert d >= floor - slack, (self.model.pair_names(int(p)), d, floor, t)
        if near.pairs.size:
            self.closest.append((float(near.distance.min()), t, q))
        return bool(near.pairs.size)


def certify(xml, chain, model, samples, floor, count=3, slack=SLACK):
    """Certify by the oracle that the closest samples keep run.floor's floors less slack."""
    raw = RawModel(xml)
    solids = RobotSolids(xml, raw, chain.base_link, [b.link for b in model.bodies])
    world = {name: [(s.kind, s.size, s.pose) for s in shapes]
             for name, shapes in model.obstacles.items()}
    for d, t, q in sorted(samples, key=lambda s: s[0])[:count]:
        values = dict(zip(chain.joint_names, q))
        near = model.distances(q, MARGIN + 0.005)
        for p in near.pairs:
            (a, i), (b, j) = model.pair_shapes(int(p))
            x = solids.posed(a, values)[i]
            y = world[b][j] if b in world else solids.posed(b, values)[j]
            need = floor.get(int(p), MARGIN) - (slack if int(p) in floor else SLACK)
            if need < 0.0:
                continue   # the oracle bounds separations, not penetration depths
            lowest, found = distance_interval(x, y, need)
            assert lowest >= need, (a, i, b, j, t, lowest, found)
