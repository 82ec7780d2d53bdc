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


"""Helpers for tests that use DDS: one ROS domain per test, bounded waits."""

import itertools
import os
import time

# Fast DDS derives its UDP ports from the domain id; ids 0..101 are safe on
# every platform. Domain 0 is left to the user's own ROS graph.
_FIRST_DOMAIN = 1
_DOMAIN_COUNT = 100
_counter = itertools.count()


def unique_domain_id():
    """Return a ROS_DOMAIN_ID not used by any other test of this run.

    Ids cycle through 1..100, offset by the pytest process id so that two test
    runs on one machine are unlikely to share a domain.
    """
    return _FIRST_DOMAIN + (os.getpid() + next(_counter)) % _DOMAIN_COUNT


def wait_until(predicate, timeout_s, spin_once=None, period_s=0.01):
    """Poll ``predicate`` (spinning ``spin_once`` between polls) for at most timeout_s.

    Returns:
        True as soon as the predicate holds, False when the time is up.

    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        if spin_once is not None:
            spin_once(period_s)
        else:
            time.sleep(period_s)
    return bool(predicate())
