# SPDX-License-Identifier: Apache-2.0

"""The arm model: the joint chain (``chain``) and the poses of any link (``frames``)."""
