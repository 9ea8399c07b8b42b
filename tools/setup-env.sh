#!/bin/bash
# Create (or refresh) the project's virtualenv in .venv with everything the
# main job and the tests need: this package (editable), the real nova,
# cinder, os-brick, tempest and python-cinderclient from PyPI.
#   tools/setup-env.sh            # idempotent; ~2 min on a fresh machine
#   tools/setup-env.sh --deps-only  # the dependencies, not this package
#                                   # (its editable install writes the
#                                   # checkout's egg-info, which suites
#                                   # running meanwhile read)
set -euo pipefail
deps_only=0
[ "${1:-}" = --deps-only ] && deps_only=1
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
VENV=${VENV:-.venv}
stamp="$VENV/.os-brick-cas-deps"
# lower bounds in the requirement files, the tested versions pinned here
constraints=${UPPER_CONSTRAINTS_FILE:-tools/upper-constraints.txt}
reqs=(-r requirements.txt -r test-requirements.txt)
[ -f doc/requirements.txt ] && reqs+=(-r doc/requirements.txt)
want=$({ printf '%s\n' "${reqs[@]}" | grep -v '^-r$'; echo "$constraints"; } |
       xargs cat | sha1sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -c "$constraints" "${reqs[@]}"
    echo "$want" > "$stamp"
fi
[ $deps_only = 1 ] && { echo "dependencies ready: $VENV"; exit 0; }
# the build backend's deprecation notices (setuptools' editable-install
# warning, ~15 lines each) are for this project's maintainers, not for
# whoever runs tools/demo.sh: they stay out of its output
PYTHONWARNINGS=ignore "$VENV/bin/pip" install -q --no-deps -e .
echo "virtualenv ready: $VENV"
