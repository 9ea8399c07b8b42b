#!/bin/bash
# Build the sphinx documentation with warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf doc/build
sphinx-build -a -E -W -d doc/build/doctrees -b html doc/source doc/build/html
sphinx-build -a -E -W -d doc/build/doctrees -b man doc/source doc/build/man
