# SPDX-License-Identifier: Apache-2.0

"""The motion policy: targets and twists in, limited joint commands out.

``tracker`` (the policy), ``trajectory`` and ``smoothing`` (the Cartesian
trajectory of targets), ``teleop`` (twists), ``stream`` and ``jerk`` (the
committed command stream), ``feedback`` (measured joint states).
"""
