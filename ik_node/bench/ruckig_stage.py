# SPDX-License-Identifier: Apache-2.0

"""Ruckig as the stage after the limiting step, for ``ik_bench controllers`` only.

The way MoveIt Servo's Ruckig smoothing plugin uses it: every period the
limiting step's new state (position, velocity) is Ruckig's target and
Ruckig's online update (time-optimal, jerk-limited, from the current
position, velocity and acceleration) gives the command one period later.
Same interface as :class:`ik_node.core.motion.jerk.JerkFilter`, so the command
stream runs unchanged with either (``CommandStream(..., stage=...)``).
Needs PyPI ``ruckig`` (MIT), installed with the test requirements.
"""

import numpy as np

# A state this close to its target, at this little speed and acceleration, is at rest;
# so is one whose target has not moved for SETTLE_STEPS periods (Ruckig's last
# approach can leave ~1e-9 residuals that a tail would chase for ever).
REST = 1e-9
SETTLE_STEPS = 100


def ruckig_stage(v_max, a_max, j_max):
    """Return a stage factory ``(q, period, steps) -> RuckigStage`` with these limits (n,)."""
    def make(q, period, steps):
        return RuckigStage(q, period, v_max, a_max, j_max)
    return make


class RuckigStage:
    """Online Ruckig toward the limiting step's state, one period at a time."""

    m = 1
    delay_s = 0.0   # not a fixed delay: Ruckig's lag depends on the motion

    def __init__(self, q, period, v_max, a_max, j_max):
        """Start at rest at q (n,) with the limits (n,)."""
        import ruckig
        self._ruckig = ruckig
        n = len(q)
        self.h = float(period)
        self._limits = (np.asarray(v_max, float), np.asarray(a_max, float),
                        np.asarray(j_max, float))
        self._otg = ruckig.Ruckig(n, self.h)
        self._inp = ruckig.InputParameter(n)
        self._out = ruckig.OutputParameter(n)
        self._inp.max_velocity = self._limits[0].tolist()
        self._inp.max_acceleration = self._limits[1].tolist()
        self._inp.max_jerk = self._limits[2].tolist()
        self.reset(q)

    def reset(self, q, v=None):
        """Restart at q with velocity v (default 0), no acceleration; return the input q."""
        q = np.array(q, dtype=float)
        v = np.zeros_like(q) if v is None else np.array(v, dtype=float)
        self._state = (q, v, np.zeros_like(q))
        self._last_x = q.copy()
        self._still = 0
        return q

    def copy(self):
        """Return an independent stage in the same state."""
        other = RuckigStage(self._state[0], self.h, *self._limits)
        other._state = tuple(x.copy() for x in self._state)
        other._last_x = self._last_x.copy()
        other._still = self._still
        return other

    def push(self, x):
        """Take the limiting step's next position x (n,); return Ruckig's state a period on."""
        x = np.array(x, dtype=float)
        target_v = np.clip((x - self._last_x) / self.h, -self._limits[0], self._limits[0])
        self._still = self._still + 1 if np.array_equal(x, self._last_x) else 0
        self._last_x = x
        inp = self._inp
        inp.current_position, inp.current_velocity, inp.current_acceleration = \
            (s.tolist() for s in self._state)
        inp.target_position = x.tolist()
        inp.target_velocity = target_v.tolist()
        inp.target_acceleration = [0.0] * len(x)
        self._otg.update(inp, self._out)
        self._state = (np.array(self._out.new_position), np.array(self._out.new_velocity),
                       np.array(self._out.new_acceleration))
        return self.output()

    def output(self):
        """Return the current state: positions, velocities, accelerations (n,)."""
        return tuple(s.copy() for s in self._state)

    def inputs(self):
        """Return the positions (n,) this stage holds: its state's and its last target's."""
        return self._state[0], self._last_x

    def at_rest(self) -> bool:
        """Return True when Ruckig rests on the limiting step's last position."""
        q, v, a = self._state
        return self._still >= SETTLE_STEPS or bool(
            np.all(np.abs(v) < REST) and np.all(np.abs(a) < REST)
            and np.all(np.abs(q - self._last_x) < REST))
