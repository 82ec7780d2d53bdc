# SPDX-License-Identifier: Apache-2.0

"""The checkout's package sources, copied as a user would get them (no venv, no build output)."""

import shutil

from models import ROOT


def copy_sources(dest):
    """Copy the tracked package sources (no venv, build output or caches) to dest."""
    ignore = shutil.ignore_patterns('.venv', 'build', 'install', 'log', '.ros', '.git',
                                    '__pycache__', '*.egg-info', '.hypothesis',
                                    '.pytest_cache', 'test-results', '.mypy_cache')
    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest
