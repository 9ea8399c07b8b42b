#!/bin/bash
# What can be verified of the tempest plugin without a cloud:
#  1. tempest list-plugins shows it;
#  2. in a fresh tempest workspace the plugin's tests are discovered;
#  3. with the feature disabled every one of them is skipped (tempest run
#     exits 1 when all tests skip, so the subunit stream is checked).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tempest list-plugins | tee "$work/plugins.txt"
grep -q 'os_brick_cas_tempest_plugin.plugin:OsBrickCasTempestPlugin' \
    "$work/plugins.txt" || { echo "FAIL: plugin not listed"; exit 1; }
echo "PASS: tempest list-plugins shows os_brick_cas"

tempest init "$work/ws" >/dev/null
cat >> "$work/ws/etc/tempest.conf" <<'CONF'

[os_brick_cas_tempest]
enabled = False
CONF
cd "$work/ws"
tempest run --list-tests --regex os_brick_cas_tempest_plugin \
    > "$work/list.txt" 2>&1 || { cat "$work/list.txt"; exit 1; }
expected=(
    tests.api.test_extra_specs.CacheModeExtraSpecsTest.test_cacheable_multiattach_rejected
    tests.api.test_extra_specs.CacheModeExtraSpecsTest.test_unknown_cache_mode_rejected
    tests.scenario.test_cached_volumes.CachedVolumeRoundTripTest.test_round_trip_wb
    tests.scenario.test_cached_volumes.CachedVolumeRoundTripTest.test_round_trip_wt
    tests.scenario.test_cached_volumes.CachedVolumeLifecycleTest.test_write_back_live_migration_refused
    tests.scenario.test_cached_volumes.CachedVolumeLifecycleTest.test_snapshot_of_attached_write_back_volume
)
for name in "${expected[@]}"; do
    grep -q "os_brick_cas_tempest_plugin.$name" "$work/list.txt" || {
        cat "$work/list.txt"; echo "FAIL: $name not discovered"; exit 1; }
done
count=$(grep -c '^os_brick_cas_tempest_plugin\.' "$work/list.txt")
echo "PASS: $count tests discovered"

set +e
tempest run --regex os_brick_cas_tempest_plugin --subunit \
    > "$work/run.subunit" 2> "$work/run.err"
set -e
subunit2csv < "$work/run.subunit" > "$work/run.csv"
python3 - "$work/run.csv" "$count" <<'PY'
import csv
import sys

rows = [r for r in csv.DictReader(open(sys.argv[1]))
        if r['test'].startswith('os_brick_cas_tempest_plugin.')
        or 'os_brick_cas_tempest_plugin' in r['test']]
statuses = {}
for row in rows:
    statuses[row['status']] = statuses.get(row['status'], 0) + 1
print('statuses:', statuses)
if not rows or set(statuses) != {'skip'}:
    print('FAIL: expected every plugin test to be skipped when disabled')
    sys.exit(1)
print('PASS: all %d results skipped while [os_brick_cas_tempest] '
      'enabled = False' % len(rows))
PY
