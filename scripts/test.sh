#!/usr/bin/env bash
# The README's test command: set everything up from nothing, then run the
# whole test suite. Extra arguments go to pytest. Ends with the plain line
# "N passed, N failed, N skipped" and pytest's exit code.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
cd "$ROOT"
mkdir -p test-results
set +e
python -m pytest --junitxml=test-results/pytest.xml -p no:cacheprovider "$@" </dev/null
status=$?
set -e
# A library may print at interpreter exit without a final newline (nanobind's
# leak report): the closing line must stand alone.
echo
python - test-results/pytest.xml <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print('0 passed, 1 failed, 0 skipped')
    sys.exit(0)
suites = [root] if root.tag == 'testsuite' else list(root)
count = {k: sum(int(s.get(k, 0)) for s in suites) for k in ('tests', 'failures', 'errors', 'skipped')}
failed = count['failures'] + count['errors']
passed = count['tests'] - failed - count['skipped']
print(f"{passed} passed, {failed} failed, {count['skipped']} skipped")
PY
exit "$status"
