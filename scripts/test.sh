#!/usr/bin/env bash
# The README's test command: set everything up from nothing, then run the
# tests. Ends with the plain line "N passed, N failed, N skipped" and a
# non-zero exit code when a test failed.
#
#   bash scripts/test.sh            every test (test/*/ but the sweeps): all but
#                                   the 'timely' and 'alone' ones in parallel
#                                   workers, then those by themselves
#   bash scripts/test.sh --fast     the fast tier, test/unit (plain Python, no
#                                   ROS, no subprocess): for daily work
#   bash scripts/test.sh ARGS...    pytest with those arguments (files, -k, -m)
#
# IK_NODE_TEST_WORKERS sets the number of pytest-xdist workers (default 4:
# the ROS tests mostly wait on DDS, so two more workers use the 2 cores' idle
# time). Results: test-results/pytest*.xml (JUnit), or in IK_NODE_TEST_RESULTS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
cd "$ROOT"
results="${IK_NODE_TEST_RESULTS:-test-results}"
mkdir -p "$results"
rm -f "$results"/pytest*.xml
workers="${IK_NODE_TEST_WORKERS:-4}"

run() {   # run <junit file> <pytest arguments...>: pytest's exit code, never aborts
  local xml="$1"
  shift
  set +e
  python -m pytest --junitxml="$xml" -p no:cacheprovider "$@" </dev/null
  local code=$?
  set -e
  # A library may print at interpreter exit without a final newline (nanobind's
  # leak report): what follows must start on a line of its own.
  echo
  return "$code"
}

status=0
if [ "$#" -eq 0 ]; then
  # Everything but the 'timely' and 'alone' tests, in parallel; then those by
  # themselves: they need the node on time (README, "Real arms") or the
  # machine to themselves (test/conftest.py).
  # worksteal: an idle worker takes queued tests from a busy one (the long
  # tests no longer end the run on one worker while the others wait).
  parallel='not timely and not alone'
  run "$results/pytest.xml" -n "$workers" --dist worksteal -m "$parallel" || status=$?
  run "$results/pytest-timely.xml" -p no:xdist -m 'timely or alone' || {
    code=$?
    if [ "$status" -eq 0 ]; then status=$code; fi
  }
elif [ "$1" = "--fast" ]; then
  shift
  run "$results/pytest.xml" -n 2 test/unit "$@" || status=$?
else
  run "$results/pytest.xml" "$@" || status=$?
fi
python - "$results" <<'PY'
import pathlib
import sys
import xml.etree.ElementTree as ET

count = {'tests': 0, 'failures': 0, 'errors': 0, 'skipped': 0}
files = sorted(pathlib.Path(sys.argv[1]).glob('pytest*.xml'))
for path in files:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        count['errors'] += 1
        continue
    for suite in [root] if root.tag == 'testsuite' else list(root):
        for key in count:
            count[key] += int(suite.get(key, 0))
if not files:
    count['errors'] += 1
failed = count['failures'] + count['errors']
passed = count['tests'] - failed - count['skipped']
print(f"{passed} passed, {failed} failed, {count['skipped']} skipped")
PY
exit "$status"
