#!/usr/bin/env bash
# Print the path of a Python X.Y that runs, or fail saying so:
#
#   bash scripts/find-python.sh 3.12
#
# Looks for pythonX.Y on PATH, then in pyenv's versions (where a pyenv shim
# names a version that is installed but not selected, the shim fails).
set -euo pipefail
want="${1:?usage: find-python.sh X.Y}"
is_it() {   # is_it <python>: true when it runs and is $want
  [ "$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want" ]
}
if command -v "python$want" >/dev/null 2>&1 && is_it "python$want"; then
  command -v "python$want"; exit 0
fi
if command -v pyenv >/dev/null 2>&1; then
  for candidate in "$(pyenv root)"/versions/"$want".*/bin/python"$want"; do
    if [ -x "$candidate" ] && is_it "$candidate"; then echo "$candidate"; exit 0; fi
  done
fi
echo "scripts/find-python.sh: no Python $want here (on PATH as python$want, or in pyenv)" >&2
exit 1
