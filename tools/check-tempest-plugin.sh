#!/bin/bash
# Check the tempest plugin as far as it can be checked without a cloud:
#   1. `tempest list-plugins` lists os_brick_cas;
#   2. a fresh tempest workspace (tempest init) gets the [os_brick_cas_tempest]
#      options in its sample config, and `tempest run --list-tests`
#      discovers the plugin's tests;
#   3. with [os_brick_cas_tempest] enabled = False every one of them is reported
#      skipped, with the reason;
#   4. with the feature enabled but only wt offered, the tests of the other
#      modes are skipped as "not offered";
#   5. an offered mode without a volume type fails instead of skipping.
# `tempest run` exits 1 when no test passed (all skipped), so verdicts come
# from the subunit stream and the trace, never from its exit status.
# tempest and python come from PATH (CI puts .venv/bin there); without
# tempest on PATH, "${VENV:-.venv}/bin" is used.
#   tools/check-tempest-plugin.sh        # ~30 s
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tempest >/dev/null; then
    PATH="$(cd "${VENV:-.venv}/bin" && pwd):$PATH"
fi

PREFIX=os_brick_cas_tempest_plugin.tests
PREFIX_RE='os_brick_cas_tempest_plugin\.tests'
MIN_TESTS=20
EXPECTED=(
    api.test_extra_specs.CacheModeExtraSpecsTest.test_cacheable_multiattach_type_refused
    api.test_extra_specs.CacheModeExtraSpecsTest.test_unknown_cache_mode_refused
    api.test_extra_specs.CacheModeExtraSpecsTest.test_cache_mode_without_cacheable_refused
    scenario.test_cached_volumes.TestCachedVolumeDataWriteThrough.test_data_survives_detach_and_reattach
    scenario.test_cached_volumes.TestCachedVolumeDataWriteBack.test_data_survives_detach_and_reattach
    scenario.test_cached_volumes.TestCachedVolumeDataWriteBack.test_data_survives_server_reboot
    scenario.test_cached_volumes.TestCasDeviceOnComputeHost.test_cas_device_exists_only_while_attached
    scenario.test_cache_mode_rules.TestLiveMigrationWriteThrough.test_live_migration_keeps_data
    scenario.test_cache_mode_rules.TestLiveMigrationWriteBack.test_live_migration_keeps_data
    scenario.test_cache_mode_rules.TestSnapshotRuleWriteBack.test_snapshot_refused_while_attached_allowed_after_detach
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. the plugin is registered
tempest list-plugins > "$work/plugins.txt" 2>&1 ||
    { cat "$work/plugins.txt"; fail "tempest list-plugins failed"; }
grep -Eq 'os_brick_cas +\| +os_brick_cas_tempest_plugin\.plugin:OsBrickCasTempestPlugin' \
    "$work/plugins.txt" ||
    { cat "$work/plugins.txt"; fail "tempest list-plugins does not list os_brick_cas"; }
echo "ok: tempest list-plugins lists os_brick_cas"

# 2. a workspace of its own (not registered in ~/.tempest)
cloud="$work/cloud"
tempest init --workspace-path "$work/workspace.yaml" "$cloud" \
    > "$work/init.log" 2>&1 || { cat "$work/init.log"; fail "tempest init"; }
for line in '[os_brick_cas_tempest]' '#offered_modes = wt,wb'; do
    grep -qxF "$line" "$cloud/etc/tempest.conf.sample" ||
        fail "the generated tempest.conf.sample lacks '$line'"
done
cp "$cloud/etc/tempest.conf" "$work/base.conf"
echo "ok: tempest init; the sample config has [os_brick_cas_tempest]"

# Write tempest.conf: what tempest init wrote plus an [os_brick_cas_tempest] section.
configure() {
    { cat "$work/base.conf"; echo; echo '[os_brick_cas_tempest]'; printf '%s\n' "$@"; } \
        > "$cloud/etc/tempest.conf"
}

# Run the tests matching $1 in the workspace; leaves $work/$2.{trace,csv}.
run_tests() {
    local regex=$1 name=$2 rc=0
    (cd "$cloud" && tempest run --regex "$regex") > "$work/$name.trace" 2>&1 || rc=$?
    [ "$rc" -le 1 ] || { cat "$work/$name.trace"; fail "tempest run exited $rc"; }
    # stestr last exits 1 when the run had failures; the stream is all we need
    (cd "$cloud" && stestr last --subunit) > "$work/$name.subunit" || true
    [ -s "$work/$name.subunit" ] || fail "no subunit stream of the $name run"
    # subunit2csv too exits 1 for a stream with failures
    subunit2csv < "$work/$name.subunit" > "$work/$name.csv" || true
    [ -s "$work/$name.csv" ] || fail "subunit2csv read nothing from the $name run"
}

# Check run $2: every result has status $3 and every listed class in $1 is
# covered; for skips the trace must give a reason containing $4.
verify_run() {
    python - "$1" "$work/$2.csv" "$work/$2.trace" "$3" "$4" <<'PY'
import csv
import re
import sys

ids_file, csv_file, trace_file, status, reason = sys.argv[1:]
classes = {line.strip().rsplit('.', 1)[0] for line in open(ids_file)
           if line.strip()}
rows = list(csv.DictReader(open(csv_file)))
reasons = dict(re.findall(r'^\{\d+\} (.+?) \.\.\. SKIPPED: (.*)$',
                          open(trace_file).read(), re.M))
problems = []
if not rows:
    problems.append('no test results at all')
for row in rows:
    if row['status'] != status:
        problems.append('%s: %s, expected %s' % (row['test'],
                                                 row['status'], status))
    elif status == 'skip' and reason not in reasons.get(row['test'], ''):
        problems.append('%s: skip reason %r lacks %r' % (
            row['test'], reasons.get(row['test']), reason))
covered = ' '.join(row['test'] for row in rows)
problems += ['%s: no result' % c for c in sorted(classes)
             if c + ')' not in covered and c + '.' not in covered]
for problem in problems:
    print('  ' + problem)
if problems:
    sys.exit(1)
print('ok: %d classes, %d results, all %s%s' % (
    len(classes), len(rows), status,
    ' ("%s")' % reason if status == 'skip' else ''))
PY
}

# 3. disabled: discovered, and every test skips with the reason
configure 'enabled = False'
(cd "$cloud" && tempest run --list-tests --regex "^$PREFIX_RE\.") \
    > "$work/list.txt" 2> "$work/list.err" ||
    { cat "$work/list.txt" "$work/list.err"; fail "tempest run --list-tests"; }
grep "^$PREFIX_RE\." "$work/list.txt" | sed 's/\[.*//' | sort -u > "$work/ids.txt"
count=$(wc -l < "$work/ids.txt")
[ "$count" -ge "$MIN_TESTS" ] ||
    { cat "$work/list.txt"; fail "$count tests discovered, expected >= $MIN_TESTS"; }
for name in "${EXPECTED[@]}"; do
    grep -qxF "$PREFIX.$name" "$work/ids.txt" ||
        { cat "$work/list.txt"; fail "$PREFIX.$name not discovered"; }
done
echo "ok: $count tests discovered, the ${#EXPECTED[@]} expected ones among them"

run_tests "^$PREFIX_RE\." disabled
verify_run "$work/ids.txt" disabled skip '[os_brick_cas_tempest] enabled = False' ||
    { cat "$work/disabled.trace"; fail "not every test skipped while disabled"; }

# 4. enabled with only wt offered: the other modes' classes skip
configure 'enabled = True' 'offered_modes = wt' 'volume_types = wt:cas-wt'
other_modes='(WriteBack|WriteAround|WriteOnly|PassThrough)'
grep -E "\.Test[A-Za-z]*$other_modes\." "$work/ids.txt" > "$work/other-ids.txt"
[ -s "$work/other-ids.txt" ] || fail "no per-mode test classes found"
run_tests "^$PREFIX_RE\.scenario\..*$other_modes\." not-offered
verify_run "$work/other-ids.txt" not-offered skip 'is not offered' ||
    { cat "$work/not-offered.trace"; fail "modes not offered did not skip"; }

# 5. an offered mode without a volume type is an error, not a skip
configure 'enabled = True' 'offered_modes = wt,wo' 'volume_types = wt:cas-wt'
grep -F '.TestCachedVolumeDataWriteOnly.' "$work/ids.txt" > "$work/wo-ids.txt"
run_tests "^$PREFIX_RE\.scenario\.test_cached_volumes\.TestCachedVolumeDataWriteOnly\." misconfigured
verify_run "$work/wo-ids.txt" misconfigured failure '' ||
    { cat "$work/misconfigured.trace"; fail "a mode without a volume type did not fail"; }
grep -q 'volume_types names no volume type' "$work/misconfigured.trace" ||
    { cat "$work/misconfigured.trace"; fail "the failure does not say what is missing"; }

echo "PASS: tempest plugin registered, $count tests discovered, all skip cleanly when disabled"
