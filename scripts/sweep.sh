#!/usr/bin/env bash
# The nightly runs: what no CI run has the time for.
#
#   bash scripts/sweep.sh               both parts below
#   bash scripts/sweep.sh --fresh-seeds [pytest args...]   the first only
#   bash scripts/sweep.sh --loaded      the second only
#
# 1. Fresh seeds: test/sweeps (SIGINT at 200 random instants of start-up,
#    motion and teardown; a 10 kHz flood for 10 s; 50 fuzz batches over DDS)
#    and every property test of test/unit and test/simulation with fresh
#    random examples (hypothesis not derandomized, a new seed each run; 200
#    examples where a test does not set its own count: the 'sweep' profile of
#    test/conftest.py). CI replays the same pinned examples every run; this
#    explores. A failure prints the seed (IK_NODE_SWEEPS=1 pytest
#    --hypothesis-seed=N replays it). About an hour on 2 cores.
# 2. Loaded: the wall-clock tests of test/system (DDS between processes, the
#    node's timers: marker 'wallclock'), three at a time beside two CPU hogs.
#    A busy machine may slow a test down, never make it fail; the 'timely'
#    ones skip (IK_NODE_BUSY_MACHINE=1: a stalled node cannot keep a forward
#    controller moving, nor meet command_latency_budget).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
cd "$ROOT"
part="${1:-all}"
case "$part" in
  --fresh-seeds|--loaded) shift ;;
  *) part=all ;;
esac
hogs=()
trap 'if [ "${#hogs[@]}" -gt 0 ]; then kill "${hogs[@]}" 2>/dev/null || true; fi' EXIT
status=0
if [ "$part" != --loaded ]; then
  seed="${IK_NODE_SWEEP_SEED:-$(python -c 'import random; print(random.SystemRandom().randrange(2**32))')}"
  echo "sweep: hypothesis seed $seed (IK_NODE_SWEEP_SEED=$seed replays it)"
  args=("$@")
  if [ "${#args[@]}" -eq 0 ]; then
    args=(test/sweeps test/unit test/simulation)
  fi
  IK_NODE_SWEEPS=1 python -m pytest -p no:cacheprovider -n "${IK_NODE_TEST_WORKERS:-2}" \
    --hypothesis-seed="$seed" "${args[@]}" </dev/null || status=$?
fi
if [ "$part" != --fresh-seeds ]; then
  for _ in 1 2; do
    (while :; do :; done) &
    hogs+=($!)
  done
  IK_NODE_BUSY_MACHINE=1 IK_NODE_TEST_RESULTS=test-results/loaded \
    bash scripts/test.sh -n 3 -m wallclock test/system || status=$?
fi
exit "$status"
