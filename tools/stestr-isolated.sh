#!/bin/bash
# One stestr suite as PARTS partitions run side by side, each in its own
# mount namespace with a private /dev and its own TMPDIR:
#   tools/stestr-isolated.sh tests/functional [PARTS [FILTER...]]
#   (PARTS default 2; FILTER: stestr's test filters, as for stestr list)
# The host simulator creates /dev/casX-Y, /dev/rbdN and /dev/disk/by-id
# links and removes strays it finds there, so two of its tests in one /dev
# delete each other's entries: stestr's own workers cannot run them side by
# side, and these suites ran one test at a time with a core idle. Here each
# partition is one stestr process (--concurrency 1) in its own namespace;
# whole test classes stay together (their fixtures are per class).
# Partitions are balanced on the durations of this checkout's last run
# (.stestr-parts/<suite>-<n>) and, for a fresh clone, on
# tests/durations.csv: every functional and nova test, seconds measured
# in a CI pre-flight's partitions on 2 cores (`stestr --repo-url
# .stestr-parts/<suite>-<n> last --subunit | subunit2csv`); a few
# seconds for a test not listed there.
# Needs root (unshare, mount). Exit status non-zero if any test failed;
# each partition's failing tests are printed at the end.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
path=${1:?usage: $0 TEST_PATH [PARTS [FILTER...]]}
parts=${2:-2}
shift $(($# < 2 ? $# : 2))
# the partitions' repositories: .stestr-parts/<name>-<n>, name the test
# path's last component unless OS_BRICK_CAS_PARTS_NAME says otherwise (an
# older release's run of the same path beside this one)
suite=${OS_BRICK_CAS_PARTS_NAME:-$(basename "$path")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# one stestr repository per partition (stestr list needs one, too: a
# fresh clone has none until some suite has run)
for number in $(seq 1 "$parts"); do
    repo=.stestr-parts/$suite-$number
    if [ ! -d "$repo/.stestr" ]; then
        mkdir -p "$repo" && stestr --repo-url "$repo" init > /dev/null
    fi
done
stestr --repo-url ".stestr-parts/$suite-1" --test-path "$path" --top-dir ./ \
    list "$@" > "$work/ids" || exit 1

# durations of the last run of each partition (test id, seconds)
: > "$work/durations"
for repo in .stestr-parts/"$suite"-*; do
    [ -d "$repo" ] || continue
    stestr --repo-url "$repo" last --subunit 2>/dev/null |
        subunit2csv --no-passthrough 2>/dev/null |
        python3 -c '
import csv, datetime, sys
for row in csv.DictReader(sys.stdin):
    try:
        start = datetime.datetime.fromisoformat(row["start_time"])
        stop = datetime.datetime.fromisoformat(row["stop_time"])
    except (KeyError, ValueError):
        continue
    print("%s %.3f" % (row["test"], (stop - start).total_seconds()))
' >> "$work/durations"
done

python3 - "$work" "$parts" <<'EOF'
import collections
import csv
import os
import sys

work, parts = sys.argv[1], int(sys.argv[2])
with open(os.path.join(work, 'ids')) as ids:
    tests = [line.strip() for line in ids if line.strip()]
known = {}
with open('tests/durations.csv') as listed:
    for row in csv.DictReader(listed):
        known[row['test']] = float(row['seconds'])
measured = []
with open(os.path.join(work, 'durations')) as durations:
    for line in durations:
        test, _, seconds = line.rpartition(' ')
        known[test.split('[')[0]] = float(seconds)
        measured.append(float(seconds))
# any other test: the median of the last run, else a few seconds
average = sorted(measured)[len(measured) // 2] if measured else 3.0
classes = collections.defaultdict(list)
for test in tests:
    classes[test.split('[')[0].rsplit('.', 1)[0]].append(test)
weight = {name: sum(known.get(t.split('[')[0], average) for t in members)
          for name, members in classes.items()}
loads = [0.0] * parts
lists = [[] for _ in range(parts)]
for name in sorted(classes, key=lambda n: (-weight[n], n)):
    emptiest = loads.index(min(loads))
    loads[emptiest] += weight[name]
    lists[emptiest].extend(classes[name])
for number, members in enumerate(lists, 1):
    with open(os.path.join(work, 'part-%d' % number), 'w') as part:
        part.write(''.join(test + '\n' for test in members))
    print('partition %d: %d tests, about %.0f s' % (
        number, len(members), loads[number - 1]))
EOF

# a private /dev (a tmpfs with the few nodes tests use) and TMPDIR; run
# by the bash below, which expands it (WORK and PART come from its env)
# shellcheck disable=SC2016
private_dev='
mkdir -p "$WORK/dev-$PART"
mount --bind /dev "$WORK/dev-$PART"
mount -t tmpfs -o mode=755 tmpfs /dev
for node in null zero random urandom tty full ptmx fuse; do
    cp -a "$WORK/dev-$PART/$node" /dev/ 2>/dev/null || true
done
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
# the data-true stand-in and the CLI tests attach loop devices: the
# control node and nodes for the first 64 (the kernel objects are shared)
cp -a "$WORK/dev-$PART/loop-control" /dev/ 2>/dev/null || true
for number in $(seq 0 63); do
    mknod -m 660 "/dev/loop$number" b 7 "$number" 2>/dev/null || true
done
mkdir /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount --bind "$WORK/dev-$PART/pts" /dev/pts
mkdir -p "$WORK/tmp-$PART"
export TMPDIR="$WORK/tmp-$PART"
exec "$@"'

pids=()
for number in $(seq 1 "$parts"); do
    [ -s "$work/part-$number" ] || continue
    repo=.stestr-parts/$suite-$number
    WORK=$work PART=$number unshare -m --propagation private \
        bash -c "$private_dev" bash \
        stestr --repo-url "$repo" --test-path "$path" --top-dir ./ run \
        --concurrency 1 --load-list "$work/part-$number" \
        > "$work/log-$number" 2>&1 &
    pids+=("$number:$!")
done
rc=0
for entry in "${pids[@]}"; do
    number=${entry%%:*}
    status=0
    wait "${entry#*:}" || status=1
    echo "=== $suite partition $number ==="
    # the summary; the whole log only when the partition failed
    if [ $status -ne 0 ]; then rc=1; cat "$work/log-$number"
    else tail -n 14 "$work/log-$number"; fi
done
if [ $rc -ne 0 ]; then
    for number in $(seq 1 "$parts"); do
        echo "=== failing tests of $suite partition $number ==="
        stestr --repo-url ".stestr-parts/$suite-$number" failing 2>&1 | tail -n 120
    done
fi
exit $rc
