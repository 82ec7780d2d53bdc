#!/usr/bin/env bash
# Run a tier of the tests against the Python packages of Ubuntu 24.04 (the
# ROS 2 Jazzy / Kilted platform): numpy 1.26, numba 0.59, matplotlib 3.6,
# lxml 5.2, PyYAML 6.0.1, urdfdom_py 1.2, pytest 7.4, hypothesis 6.98
# (requirements/distro-noble.txt), in a second venv, .venv-distro.
#
#   bash scripts/distro-check.sh              the fast tier (test/unit)
#   bash scripts/distro-check.sh ARGS...      pytest with those arguments
#   bash scripts/distro-check.sh --setup      only create .venv-distro and fill its
#                                             numba cache with the kernels of the
#                                             bundled arms (CI does it beside the
#                                             main job)
#
# No ROS wheels there: the fast tier imports no ROS package. CI runs it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
venv=.venv-distro
if [ ! -x "$venv/bin/python" ]; then
  python="$(command -v python3.11 || command -v python3)"
  "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
    echo "scripts/distro-check.sh: Python 3.11 is required" >&2; exit 1; }
  echo "distro-check: creating $venv"
  "$python" -m venv "$venv"
  touch "$venv/COLCON_IGNORE"
fi
stamp="$venv/.requirements"
want="$(sha256sum requirements/distro-noble.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "distro-check: installing requirements/distro-noble.txt"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    -r requirements/distro-noble.txt
  echo "$want" > "$stamp"
fi
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
names = ['numpy', 'numba', 'matplotlib', 'lxml', 'PyYAML', 'urdfdom-py', 'pytest', 'hypothesis']
print('distro-check: ' + ', '.join(f'{n} {md.version(n)}' for n in names))
PY
# numba's cache of this venv's numba apart from the main venv's (each would
# otherwise overwrite the other's machine code: numba keys it by function).
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$ROOT/$venv/numba-cache}"
if [ "${1:-}" = "--setup" ]; then
  # numba 0.59 compiles every kernel the first time it runs: about half of a
  # cold fast tier here (180 s cold, 86 s warm). Every compiled path of a
  # tracker of each bundled arm, both solvers (what the node's first start
  # compiles), fills the cache; the tests' own signatures compile in the tier.
  started=$SECONDS
  PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" - <<'PY'
from ik_node.bench.ik import BUNDLED
from ik_node.core.model.chain import Chain
from ik_node.core.motion.tracker import TrackerConfig
from ik_node.core.warm import compile_kernels
from ik_node.urdf import bundled_urdf

for arm, (file, base, tip) in sorted(BUNDLED.items()):
    chain = Chain.from_urdf_file(str(bundled_urdf(file)), base, tip)
    for solver in ('auto', 'jacobian'):
        compile_kernels(chain, solver, chain.mid_limits(), TrackerConfig())
PY
  echo "distro-check: numba kernels of the bundled arms compiled in $((SECONDS - started)) s"
  exit 0
fi
mkdir -p test-results
args=("$@")
if [ "${#args[@]}" -eq 0 ]; then
  args=(-n 2 test/unit)
fi
# The checkout is imported from the current directory (no install needed).
exec "$venv/bin/python" -m pytest -p no:cacheprovider --junitxml=test-results/distro.xml \
  "${args[@]}" </dev/null
