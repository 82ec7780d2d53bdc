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
