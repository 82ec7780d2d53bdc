#!/usr/bin/env bash
# The README's main job: set everything up from nothing, then run ik_node on the
# bundled 7-DoF arm with a demo stream of targets (see ik_node/ros/demo.py).
# Extra arguments go to ik_demo (e.g. --duration 20).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
cd "$ROOT"
exec ik_demo "$@"
