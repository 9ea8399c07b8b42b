#!/bin/bash
# Build the harness against one OCF tree and run it: exit 1 when the read
# lock count reaches the write-locked value.
set -e
ocf=$1
out=$(mktemp -d)
mkdir -p "$out/inc" && ln -s "$(realpath "$ocf/inc")" "$out/inc/ocf"
gcc -O1 -w -I "$ocf/src" -I "$ocf/env/posix" -I "$out/inc" -I "$ocf/inc" \
    "$(dirname "$0")/harness.c" "$(dirname "$0")/stubs.c" -o "$out/harness"
"$out/harness"
