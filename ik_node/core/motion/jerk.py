# SPDX-License-Identifier: Apache-2.0

"""Jerk limits: an exact moving-average stage after the limiting step.

The limiting step (:mod:`ik_node.core.kernels.limits`) run on a fixed grid of period
h gives positions x_k whose velocity ``v_k = (x_k - x_{k-1}) / h`` is
constant over each step and changes by at most ``a_max h`` per step; joined
linearly, x(t) keeps the speed and position limits. Two moving averages make
it smooth (FIR jerk limiting, as in Biagiotti and Melchiorri's "FIR filters
for online trajectory planning"):

* y(t): the mean of x over the last h. Its velocity is continuous and its
  acceleration ``(v(t) - v(t - h)) / h`` is within ``a_max``;
* z(t): the mean of y over the last ``W = m h``. Its acceleration is the
  mean of y's, so within ``a_max``, and continuous; its jerk is
  ``(y''(t) - y''(t - W)) / W``, within ``2 a_max / W``.

So with ``W >= 2 a_max / j_max`` (per joint; one W for all joints keeps
them in step) z keeps every limit: speed and positions (means of values
within them), acceleration, and jerk. Every breakpoint lies on the grid, so
between two grid instants z is exactly one cubic: the quintic that a
joint_trajectory_controller fits through (z, z', z'') at both ends is that
cubic. The price is a delay of ``(h + W) / 2`` (the means lag a steady
motion by that much) and motion ends that much later.

Units: rad, rad/s, rad/s^2, rad/s^3 (m for prismatic joints); seconds.
"""

import collections
import math
from typing import Deque, Tuple

from ik_node.core.errors import InvalidInputError
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Jerk limits accepted, rad/s^3 (m/s^3): the scalar parameter's and each joint's.
JERK_RANGE = (1.0, 1e6)


def smoothing_steps(period: float, accel, jerk) -> int:
    """Return m >= 1: the smallest window W = m period with W >= 2 a / j for every joint.

    Args:
        period: the grid's step h, seconds, > 0.
        accel: (n,) acceleration limits, > 0.
        jerk: (n,) jerk limits, > 0 (inf: no jerk limit, m = 1).

    """
    ratio = max((2.0 * float(a) / float(j) for a, j in zip(accel, jerk)), default=0.0)
    # 1e-9: a window equal to 2 a / j up to rounding is enough.
    return max(1, int(math.ceil(ratio / period - 1e-9)))


def check_jerk_limits(values, n: int) -> FloatArray:
    """Return per-joint jerk limits (n,) from one value or n values, each within JERK_RANGE.

    Raises:
        InvalidInputError: a value outside JERK_RANGE (or NaN), or a wrong count.

    """
    limits = np.array(values, dtype=np.float64).reshape(-1)
    if limits.size == 1:
        limits = np.full(n, limits[0])
    low, high = JERK_RANGE
    if limits.size != n or not np.all((limits >= low) & (limits <= high)):
        raise InvalidInputError(f'jerk limits: expected one or {n} values in [{low:g}, '
                                f'{high:g}], received {np.asarray(values).tolist()}')
    return limits


def position_weights(m: int) -> FloatArray:
    """Return (m + 2,): how often each window input enters ``6 m z`` (JerkFilter.output).

    Input j (oldest 0) is x_{i-2} for i = j + 2 <= m + 1, 4 x_{i-1} for
    1 <= j <= m and x_i for 2 <= j <= m + 1: weights 1, 5, 6, ..., 6, 5, 1
    (1, 5, 5, 1 at m = 2; 1, 4, 1 at m = 1), which sum to 6 m.
    """
    j = np.arange(m + 2)
    return ((j <= m - 1) + 4.0 * ((j >= 1) & (j <= m)) + (j >= 2)).astype(np.float64)


class JerkFilter:
    """The two moving averages of x on a grid of period h (module docstring).

    Args:
        q: (n,) start position, at rest.
        period: h, seconds, > 0.
        steps: m, the second window in periods, >= 1.

    """

    def __init__(self, q, period: float, steps: int):
        """Start at rest at q."""
        if not (math.isfinite(period) and period > 0.0) or steps < 1:
            raise InvalidInputError(f'JerkFilter: expected period > 0 and steps >= 1, received '
                                    f'{period!r}, {steps!r}')
        self.h = float(period)
        self.m = int(steps)
        self._x: Deque[FloatArray] = collections.deque(maxlen=self.m + 2)
        self._weights = position_weights(self.m)
        self.reset(q)

    @property
    def delay_s(self) -> float:
        """How far the output lags a steady motion of the input, seconds: (h + W) / 2."""
        return 0.5 * self.h * (self.m + 1)

    def reset(self, q, v=None) -> FloatArray:
        """Restart so that the output is at q with velocity v (default 0) and no acceleration.

        The history becomes the steady motion at v that the output shows at q:
        the input is then ``q + v delay_s``, returned (n,) so the caller's
        limiting step can continue from it.
        """
        q = np.array(q, dtype=np.float64)
        v = np.zeros_like(q) if v is None else np.array(v, dtype=np.float64)
        newest = q + v * self.delay_s
        self._x.clear()
        for back in range(self.m + 1, -1, -1):
            self._x.append(newest - v * (back * self.h))
        self._same = self.m + 2 if not np.any(v) else 1
        return newest

    def copy(self) -> 'JerkFilter':
        """Return an independent filter with the same history."""
        other = JerkFilter.__new__(JerkFilter)
        other.h, other.m, other._weights = self.h, self.m, self._weights
        other._x = collections.deque((x.copy() for x in self._x), maxlen=self.m + 2)
        other._same = self._same
        return other

    def push(self, x) -> Tuple[FloatArray, FloatArray, FloatArray]:
        """Add the input x (n,) at the next grid instant; return the output (z, z', z'') there."""
        x = np.array(x, dtype=np.float64)
        self._same = self._same + 1 if np.array_equal(x, self._x[-1]) else 1
        self._x.append(x)
        return self.output()

    def output(self) -> Tuple[FloatArray, FloatArray, FloatArray]:
        """Return the output at the newest grid instant: positions, velocities, accelerations (n,).

        With X[0] = x_{k-m-1} ... X[m+1] = x_k:
        ``z = sum_{i} (x_{i-2} + 4 x_{i-1} + x_i) / (6 m)`` over the m newest i
        (the integral of y over each step, exact for linear x),
        ``z' = (y_k - y_{k-m}) / W`` with ``y_k = (x_{k-1} + x_k) / 2``,
        ``z'' = (v_k - v_{k-m}) / W`` with ``v_k = (x_k - x_{k-1}) / h``.
        """
        x = self._x
        m, h = self.m, self.h
        # The sum over i as one product with each input's weight: one pass
        # over the window, whatever m (a loop of array operations cost 0.7 ms
        # per output at m = 4000: h = 1 ms, a 20-fold acceleration-to-jerk ratio).
        z = (self._weights @ np.array(x)) / (6.0 * m)
        window = m * h
        dz = ((x[m] + x[m + 1]) - (x[0] + x[1])) / (2.0 * window)
        ddz = ((x[m + 1] - x[m]) - (x[1] - x[0])) / (h * window)
        return z, dz, ddz

    def inputs(self) -> Tuple[FloatArray, ...]:
        """Return what the window holds: m + 2 positions (n,) of the input, oldest first."""
        return tuple(self._x)

    def at_rest(self) -> bool:
        """Return True when every input in the window is the same: the output rests there.

        (Kept as a count of the newest inputs equal to the last, O(1) a tick.)
        """
        return self._same >= len(self._x)
