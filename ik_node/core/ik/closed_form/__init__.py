# SPDX-License-Identifier: Apache-2.0

"""Closed-form 7-DoF solvers: SRS arms (``srs``) and offset-wrist arms (``offset_wrist``)."""
