# SPDX-License-Identifier: Apache-2.0

"""Inverse kinematics: solvers that turn a target pose into joints.

The solver interface (``base``), the factory (``factory``), the Jacobian
solver (``jacobian``), local damped steps (``local``) and the closed forms
(``closed_form``).
"""
