#!/usr/bin/env bash
# The fast tier (test/unit: plain Python, no ROS) on another Python and other
# versions of the dependencies, in a venv of its own:
#
#   bash scripts/python-tier.sh noble [ARGS...]    Python 3.12 with Ubuntu 24.04's
#        versions (Jazzy, Kilted): numpy 1.26, numba 0.59, scipy 1.11, lxml 5.2,
#        PyYAML 6.0.1, pytest 7.4, hypothesis 6.98 (requirements/distro-noble.txt)
#   bash scripts/python-tier.sh newest [ARGS...]   Python 3.13 with the newest
#        releases (requirements/newest.txt)
#
# ARGS go to pytest (default: -n 2 test/unit). The venv is .venv-<name>; its
# numba cache is its own. IK_NODE_TIER_PYTHON overrides the Python.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
name="${1:-}"
case "$name" in
  noble) version=3.12; requirements=requirements/distro-noble.txt ;;
  newest) version=3.13; requirements=requirements/newest.txt ;;
  *) echo "usage: scripts/python-tier.sh noble|newest [pytest args...]" >&2; exit 2 ;;
esac
shift
venv=".venv-$name"
if [ ! -x "$venv/bin/python" ]; then
  python="${IK_NODE_TIER_PYTHON:-$(bash scripts/find-python.sh "$version")}"
  echo "python-tier: creating $venv with $("$python" --version)"
  "$python" -m venv "$venv"
  touch "$venv/COLCON_IGNORE"
fi
stamp="$venv/.requirements"
want="$(cat "$requirements" requirements/runtime.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "python-tier: installing $requirements"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --only-binary :all: -r "$requirements" 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c 'import numpy, pytest' || {
    echo "python-tier: installing $requirements failed (above)" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
import sys
names = ['numpy', 'numba', 'scipy', 'lxml', 'PyYAML', 'urdfdom-py', 'pytest', 'hypothesis']
print(f'python-tier: Python {sys.version.split()[0]}, '
      + ', '.join(f'{n} {md.version(n)}' for n in names))
PY
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$ROOT/$venv/numba-cache}"
mkdir -p test-results
args=("$@")
if [ "${#args[@]}" -eq 0 ]; then
  args=(-n 2 test/unit)
fi
# The checkout is imported from the current directory (no install needed).
exec "$venv/bin/python" -m pytest -p no:cacheprovider --junitxml="test-results/tier-$name.xml" \
  "${args[@]}" </dev/null
