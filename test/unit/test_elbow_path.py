# SPDX-License-Identifier: Apache-2.0

"""The elbows' way to their poles played within every joint's limits (ElbowPath, plain Python).

Random smooth joint paths (a sine and a slope per joint, some bent sharply),
cut into waypoints a few millimetres of "elbow" apart and handed over two per
tick ahead of the playback, as the group tracker does. What must hold, from
the goals and velocities the playback gives, by the test's own differences:

* every joint's goal velocity within its speed limit and the elbows' speed
  within the tip speed limit;
* every joint's goal velocity changing by at most its acceleration limit
  over a tick (the command can follow it and stay on the path);
* each goal on the polyline of the waypoints (between two of them);
* the playback ends at rest at the last waypoint once the path is finished,
  and it never passes the last waypoint made so far.
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.core.motion.elbows import ElbowPath
import numpy as np

DT = 0.01
N = 7


def waypoints(seed, count, spacing):
    """Return (points (count + 1, N), elbow lengths (count,)) along a random smooth path."""
    rng = np.random.default_rng(seed)
    amp, freq, slope = rng.uniform(0.05, 1.0, N), rng.uniform(1.0, 40.0, N), \
        rng.uniform(-3.0, 3.0, N)
    s = np.arange(count + 1) * spacing
    points = amp * np.sin(np.outer(s, freq)) + np.outer(s, slope)
    return points, np.full(count, spacing)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 40),
       spacing=st.floats(5e-4, 5e-3), per_tick=st.integers(1, 3),
       max_speed=st.floats(0.05, 1.0))
def test_the_playback_keeps_every_joint_within_its_limits_and_ends_at_rest(
        seed, count, spacing, per_tick, max_speed):
    points, lengths = waypoints(seed, count, spacing)
    rng = np.random.default_rng(seed + 1)
    speeds, accels = rng.uniform(0.5, 3.0, N), rng.uniform(2.0, 20.0, N)
    path = ElbowPath(points[0], speeds, accels, max_speed)
    made, last_v, cum = 0, np.zeros(N), np.concatenate(([0.0], np.cumsum(lengths)))
    for _ in range(100000):
        for _ in range(per_tick):
            if made < count:
                path.extend(points[made + 1], lengths[made], DT)
                made += 1
        if made == count and not path.done:
            path.finish()
        goal, v = path.advance(DT)
        assert np.all(np.abs(v) <= speeds * (1 + 1e-9))
        assert path.speed <= max_speed * (1 + 1e-9)
        assert np.all(np.abs(v - last_v) <= accels * DT * (1 + 1e-9)), \
            np.max(np.abs(v - last_v) / (accels * DT))
        last_v = v
        assert path.s <= cum[made] + 1e-12     # never past the last waypoint made
        k = min(int(np.searchsorted(cum, path.s, side='right')) - 1, count - 1)
        w = (path.s - cum[k]) / lengths[k]
        np.testing.assert_allclose(goal, points[k] + w * (points[k + 1] - points[k]),
                                   atol=1e-12)
        if path.finished:
            break
    assert path.finished
    np.testing.assert_allclose(goal, points[-1], atol=1e-12)
    assert np.all(v == 0.0)
