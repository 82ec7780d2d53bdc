# SPDX-License-Identifier: Apache-2.0

"""Everything numba compiles: plain Python in the numba subset, and the machinery that compiles it.

``base`` (3-vectors, 3x3 matrices as 9-tuples, quaternions, chain kinematics),
``srs`` and ``offset_wrist`` (the closed forms at one swivel angle / one q7),
``limits`` (the limiting step), ``lm`` (the compiled Levenberg-Marquardt
descent); ``compile`` clones and compiles them, ``backend`` picks numpy or
numba. Importing this package imports nothing (the core runs without numba).
"""
