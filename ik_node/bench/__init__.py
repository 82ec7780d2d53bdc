# SPDX-License-Identifier: Apache-2.0

"""Seeded benchmarks behind the ``ik_bench`` command (kept out of the tests)."""
