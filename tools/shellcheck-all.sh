#!/bin/bash
# Run shellcheck on every shell script of the project (tools, .ci, devstack).
set -euo pipefail
cd "$(dirname "$0")/.."
files=(tools/*.sh tools/kernel/*.sh tools/deploy/*.sh .ci/run)
if [ -d devstack ]; then
    mapfile -t -O "${#files[@]}" files < <(
        find devstack -type f \( -name '*.sh' -o -name settings \
            -o -path '*/lib/*' \) | sort)
fi
shellcheck "${files[@]}"
