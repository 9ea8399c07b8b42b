#!/bin/bash
# The main job: set up, then run 'os-brick-cas demo', which attaches a
# volume per offered cache mode through the real os_brick_cas code. Without
# Open CAS on this machine it runs against the bundled simulated host and
# says so in its output.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup-env.sh
exec .venv/bin/os-brick-cas demo "$@"
