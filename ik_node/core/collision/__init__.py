# SPDX-License-Identifier: Apache-2.0

"""Collision: shapes, the robot's and world's model with distances, the step's guard.

``shapes`` (primitives, mesh hulls, checks), ``model`` (posed shapes, pairs,
distances and their gradients, through coal), ``guard`` (the constraint of
the one limiting step). coal is imported when a model is built, not here.
"""
