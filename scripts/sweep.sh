#!/usr/bin/env bash
# The sweeps: what no CI run has the time for, run by hand or nightly.
#
#   bash scripts/sweep.sh [pytest args...]
#
# * test/sweeps: SIGINT at 200 random instants of start-up, motion and
#   teardown (test_signal_sweep.py), a 10 kHz flood for 10 s and 50 fuzz
#   batches over DDS (test_dds_sweeps.py);
# * every property test of test/unit and test/simulation with fresh random
#   examples (hypothesis not derandomized, a new seed each run; 200 examples
#   where a test does not set its own count: the 'sweep' profile of
#   test/conftest.py).
#
# CI replays the same pinned examples every run; this explores. A failure
# prints the seed (pytest --hypothesis-seed=N replays it, with IK_NODE_SWEEPS=1)
# and hypothesis's reproduce_failure blob. Takes about an hour on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
cd "$ROOT"
export IK_NODE_SWEEPS=1
seed="${IK_NODE_SWEEP_SEED:-$(python -c 'import random; print(random.SystemRandom().randrange(2**32))')}"
echo "sweep: hypothesis seed $seed (IK_NODE_SWEEP_SEED=$seed replays it)"
args=("$@")
if [ "${#args[@]}" -eq 0 ]; then
  args=(test/sweeps test/unit test/simulation)
fi
exec python -m pytest -p no:cacheprovider -n "${IK_NODE_TEST_WORKERS:-2}" \
  --hypothesis-seed="$seed" "${args[@]}" </dev/null
