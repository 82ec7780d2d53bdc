#!/usr/bin/env bash
# Create (or update) .venv with everything ik_node needs, from PyPI alone.
# Idempotent: a second run with unchanged requirements only checks a stamp.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

find_python() {
  for candidate in python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "scripts/setup.sh: Python 3.11 is required (the ROS 2 Kilted wheels are built for it)" >&2
  return 1
}

if [ ! -x .venv/bin/python ]; then
  PYTHON="$(find_python)"
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# colcon must not mistake the venv's ament packages for workspace packages.
touch .venv/COLCON_IGNORE

stamp=.venv/.ik_node-requirements
want="$(cat requirements/*.txt setup.py | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing requirements (ROS 2 Kilted wheels, numpy, test tools)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
    -r requirements/test.txt
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
    --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
fi
echo "setup: environment ready in $ROOT/.venv"
