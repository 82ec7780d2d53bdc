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

"""Collision: shapes, the robot's and world's model with distances, the step's guard.

``shapes`` (primitives, mesh hulls, checks), ``model`` (posed shapes, pairs,
distances and their gradients, through coal), ``guard`` (the constraint of
the one limiting step). coal is imported when a model is built, not here.
"""
