#!/bin/bash
# Build the reno release notes with warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf releasenotes/build
sphinx-build -a -E -W -d releasenotes/build/doctrees -b html \
    releasenotes/source releasenotes/build/html
