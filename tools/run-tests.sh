#!/bin/bash
# The whole test suite, as CI runs it:
#   tools/run-tests.sh                 # every suite
#   tools/run-tests.sh unit functional # only these
# Suites: pep8 unit functional nova cinder upstream ceph kernel pyocf tempest
#         devstack deploy docs releasenotes prometheus (on the newest
#         OpenStack release, 2026.2), release-2025.1 release-2026.1 (unit,
#         nova, cinder and upstream in .venv-<release> on that release's
#         nova, cinder and os-brick). kernel boots a qemu guest with real
#         krbd and Open CAS (built with the role's build tasks and the
#         patch series) and runs all of tests/kernel on it
#         (tools/run-kernel-tests.sh). ansible: the same guest provisioned
#         by the os_brick_cas role instead, its own tests and the attach
#         tests (tools/run-ansible-tests.sh; --whole-tier: then the whole
#         tier; on request: a play is 11-13 min of module runs under TCG).
# Each runs even if an earlier one failed; the exit status is non-zero if
# any failed. Suites run one after another, but the light ones after the
# kernel suite run beside its guest at a low priority (see SHADOW
# below), and the older releases' dependencies install while the first
# suites run. Needs root for the system packages (Ceph, fio, rbd-fuse,
# the linter, promtool, qemu) and for the /dev entries the host simulator
# creates.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ALL=(kernel pep8 unit cinder upstream release-light-2025.1
     release-light-2026.1 pyocf tempest devstack deploy docs releasenotes
     prometheus ceph functional nova release-nova-2025.1 release-nova-2026.1)
SUITES=("$@")
[ ${#SUITES[@]} -eq 0 ] && SUITES=("${ALL[@]}")


# Failures are printed again after the summary, so the tail of a CI log
# (often all that is kept) says which test failed and why.
FAILURES_DIR=$(mktemp -d)
trap 'rm -rf "$FAILURES_DIR"' EXIT

stestr_run() {
    local path=$1; shift
    stestr --test-path "$path" --top-dir ./ run "$@"
}

# A suite whose tests or tools have not been written yet is reported as
# absent (never as passed).
present() {
    case "$1" in
        pep8|unit|functional) return 0 ;;
        nova|cinder|ceph) [ -n "$(find "tests/$1" -name 'test_*.py' -print -quit)" ] ;;
        upstream) [ -x tools/run-upstream-suites.sh ] ;;
        pyocf) [ -x tools/run-pyocf-tests.sh ] ;;
        kernel) [ -x tools/run-kernel-tests.sh ] ;;
        ansible) [ -x tools/run-ansible-tests.sh ] ;;
        tempest) [ -x tools/check-tempest-plugin.sh ] ;;
        devstack) [ -x tools/test-devstack-plugin.sh ] ;;
        deploy) [ -x tools/check-deploy-artifacts.sh ] ;;
        docs) [ -x tools/build-docs.sh ] ;;
        releasenotes) [ -x tools/build-releasenotes.sh ] ;;
        release-*) [ -f "tools/upper-constraints-${1##*-}.txt" ] ;;
        *) return 0 ;;
    esac
}

# unit, nova, cinder and upstream against one older OpenStack release, in
# its own venv (its constraints file pins that release's services):
#   release_suite RELEASE [all|light|nova]
# light: unit, cinder and upstream (unit tests, fine beside the guest);
# nova: nova's flows, the two /dev-isolated partitions
release_suite() {
    local release=$1 part=${2:-all} venv=".venv-$1" rc=0 tiers
    if [ -n "$prepare_pid" ]; then
        wait "$prepare_pid"
        prepare_pid=
        grep -v '^WARNING: Location' "$FAILURES_DIR/prepare-venvs.log"
    fi
    if [ -z "${READY[$release]:-}" ]; then
        VENV=$venv UPPER_CONSTRAINTS_FILE="tools/upper-constraints-$release.txt" \
            tools/setup-env.sh || return 1
    fi
    case $part in
        all) tiers=(unit nova cinder upstream) ;;
        light) tiers=(unit cinder upstream) ;;
        nova) tiers=(nova) ;;
    esac
    (
        # shellcheck disable=SC2030
        export PATH="$PWD/$venv/bin:$PATH"
        for tier in "${tiers[@]}"; do
            echo "--- $tier on OpenStack $release ---"
            case $tier in
                # nova's flows on that release; the hypothesis machine
                # and the lock tests exercise our code, not nova's API
                # (its own partition repositories: it may run beside
                # the newest release's nova suite)
                nova) OS_BRICK_CAS_PARTS_NAME=release-nova-$release \
                          tools/stestr-isolated.sh tests/nova 2 \
                          --exclude-regex 'test_marker_stateful|test_fence_lock' ;;
                upstream) tools/run-upstream-suites.sh ;;
                *) stestr_run "tests/$tier" ;;
            esac || { echo "$tier FAILED on $release"; rc=1; }
        done
        exit $rc
    )
}

suite() {
    case "$1" in
        pep8) flake8 && tools/shellcheck-all.sh &&
              python -m docutils --halt=2 README.rst /dev/null ;;
        unit) stestr_run tests/unit ;;
        # the host simulator's /dev entries: one test at a time per /dev,
        # so two partitions, each in its own mount namespace
        functional) tools/stestr-isolated.sh tests/functional ;;
        nova) tools/stestr-isolated.sh tests/nova ;;
        cinder) stestr_run tests/cinder ;;
        ceph) rm -f .ceph-bench.txt .ceph-bench-cache.txt .ceph-bench-drain.txt
              timeout 1800 stestr --test-path tests/ceph --top-dir ./ run \
                  --concurrency 1 || return 1
              # nova cannot share a process with cinder: its own run
              timeout 900 stestr --test-path tests/ceph_nova --top-dir ./ \
                  run --concurrency 1 || return 1
              echo '--- os-brick-cas bench on the real-Ceph tier ---'
              cat .ceph-bench.txt
              echo '--- the data-true stand-in warming up (8 MiB range) ---'
              cat .ceph-bench-cache.txt
              echo '--- drain time and 4k write latency, cached vs drained ---'
              cat .ceph-bench-drain.txt ;;
        upstream) tools/run-upstream-suites.sh ;;
        # OCF's own userspace framework: the reader race reproduced on
        # unpatched v26.03 and gone with the role's patch series
        pyocf) timeout 1800 tools/run-pyocf-tests.sh ;;
        # installs what it needs, fails (never skips) when the guest cannot
        # run; the guest has its own bound (80 min), this one also covers
        # apt and a cold Open CAS build. The whole tier on a guest that
        # installs Open CAS itself; the role's play (11-13 min of module
        # runs under TCG) and its own tests run on request: suite ansible,
        # tools/run-ansible-tests.sh (--whole-tier: the role, then the
        # whole tier). Each reader-race reproducer runs three passes at
        # CI's sizes (1 fresh MiB, 16 wide lines per pass; by name the
        # default is 4 MiB and 32 lines); on the unpatched build the wide-
        # line wb and wo cases lose data or read stale blocks at these
        # sizes (2026-11-29: wb lost 80-112 blocks in every pass, wo read
        # a stale block in two of three); tools/run-pyocf-tests.sh shows
        # the race and the fix in OCF itself
        kernel) OS_BRICK_CAS_RACE_PASSES=${OS_BRICK_CAS_RACE_PASSES:-3} \
                    OS_BRICK_CAS_RACE_MIB=${OS_BRICK_CAS_RACE_MIB:-1} \
                    OS_BRICK_CAS_RACE_WIDE_LINES=${OS_BRICK_CAS_RACE_WIDE_LINES:-16} \
                    OS_BRICK_CAS_KERNEL_TIMEOUT=${OS_BRICK_CAS_KERNEL_TIMEOUT:-4800} \
                    setsid -w timeout --kill-after=60 5300 \
                    tools/run-kernel-tests.sh ;;
        ansible) tools/run-ansible-tests.sh ;;
        tempest) tools/check-tempest-plugin.sh ;;
        devstack) tools/test-devstack-plugin.sh ;;
        deploy) tools/check-deploy-artifacts.sh ;;
        docs) tools/build-docs.sh ;;
        releasenotes) tools/build-releasenotes.sh ;;
        # promtool required: the alert rules, their unit tests, the
        # dashboard's queries and a scrape of the simulated host
        prometheus) (cd etc/monitoring &&
                     promtool check rules os-brick-cas-alerts.yaml &&
                     promtool test rules tests/os-brick-cas-alerts-test.yaml) &&
                    OS_BRICK_CAS_REQUIRE_PROMTOOL=1 stestr_run tests/unit \
                        'test_metrics\.MonitoringFiles' &&
                    OS_BRICK_CAS_REQUIRE_PROMTOOL=1 stestr_run \
                        tests/functional --concurrency 1 \
                        'test_metrics\..*promtool' ;;
        release-light-*) release_suite "${1#release-light-}" light ;;
        release-nova-*) release_suite "${1#release-nova-}" nova ;;
        release-*) release_suite "${1#release-}" ;;
        *) echo "unknown suite $1 (known: ${ALL[*]})"; return 2 ;;
    esac
}

failed=()
declare -A took
# older releases whose venv is set up already (see the lanes)
declare -A READY=()
declare -A absent

# The older releases' dependencies are installed while the first suites
# run: pip is one process on one core, about 2 min per virtualenv, and the
# suites before the kernel's leave time on the other core. Each
# release-* suite waits for it, then installs this package itself.
declare -A RELEASES=()
for name in "${SUITES[@]}"; do
    case $name in
        release-*) present "$name" && RELEASES[${name##*-}]=1 ;;
    esac
done
prepare_pid=
if [ ${#RELEASES[@]} -gt 0 ]; then
    (
        for release in "${!RELEASES[@]}"; do
            VENV=.venv-$release \
                UPPER_CONSTRAINTS_FILE="tools/upper-constraints-$release.txt" \
                nice -n 10 tools/setup-env.sh --deps-only ||
                echo "could not prepare .venv-$release (its suite retries)"
        done
    ) > "$FAILURES_DIR/prepare-venvs.log" 2>&1 &
    prepare_pid=$!
fi

# The kernel suite's host packages, virtme-ng and its cold Open CAS build
# (the role's build tasks, ~6.5 min on 2 cores) need nothing of the steps
# below, and the build is on the critical path: the guest boots after it,
# and the heavy suites wait for the guest. So they start first, beside the
# main virtualenv's pip, and the kernel suite finds the build in its cache
# (one ~10 s run of the build tasks that must change nothing).
kernel_prepare_pid=
for name in "${SUITES[@]}"; do
    if [ "$name" = kernel ] && present kernel; then
        tools/kernel/install-host.sh --packages-only || exit 1
        echo "[run-tests +${SECONDS}s] kernel suite: preparing its build in the background"
        timeout 1800 tools/run-kernel-tests.sh --prepare \
            > "$FAILURES_DIR/kernel-prepare.log" 2>&1 &
        kernel_prepare_pid=$!
        break
    fi
done

# The main virtualenv, the system packages and Ceph, beside the older
# releases' pip above
tools/setup-env.sh || exit 1
tools/install-system-packages.sh || exit 1
if [ -x tools/install-ceph.sh ]; then
    tools/install-ceph.sh "$PWD/.venv" || exit 1
fi
echo "[run-tests +${SECONDS}s] set up"
# (release_suite sets its own PATH in a subshell)
# shellcheck disable=SC2031
export PATH="$PWD/.venv/bin:$PATH"
export OS_BRICK_CAS_REQUIRE_CEPH=${OS_BRICK_CAS_REQUIRE_CEPH:-1}

# The kernel suite runs first, in the background, in a session, hence a
# scheduler autogroup, of its own (setsid): its builds on a fresh machine
# (Open CAS ~4.5 min on 2 cores, libvirt-python, virtme-ng) and then a TCG
# guest that keeps one to two cores busy for 20-25 min. The light suites that follow it (SHADOW: unit
# tests, linters, builds; no timing assertions, nothing on the host's
# /dev beyond one test at a time) run beside it with this session's
# autogroup at nice 10: where the guest wants both cores they get about a
# tenth, otherwise what it leaves idle. The first suite not in SHADOW
# waits for the guest; the heavy ones (functional and nova in two
# partitions, the older releases' nova flows) run after it at full speed.
# The host's own Ceph suite closes the SHADOW list: it keeps about one
# core busy (a one-process suite waiting on Ceph and FUSE), which is what
# the guest leaves idle in its last minutes (a pre-flight of 2026-11-29:
# 0.6-0.8 of a core idle for the guest's last 6.5 min, then ~0.9 cores
# used by this suite alone for 4 min after the guest). OS_BRICK_CAS_KERNEL_SHADOW=0 runs every suite
# serially. Heavy suites beside the guest were tried and are slower on 2
# cores: at equal priority every Ansible task in the guest took 5x longer
# and the guest ran out of its 70 min (CI, 2026-11-28); with functional
# and nova beside it at nice 19 the guest's tests took ~85 s each and
# those suites starved (a drain timing test failed; the run would have
# taken ~100 min).
SHADOW=(pep8 unit cinder upstream release-light-2025.1 release-light-2026.1
        pyocf tempest devstack deploy docs releasenotes prometheus ceph)
kernel_pid=
kernel_start=0

in_shadow() {
    local light
    [ "${OS_BRICK_CAS_KERNEL_SHADOW:-1}" = 1 ] || return 1
    for light in "${SHADOW[@]}"; do [ "$light" = "$1" ] && return 0; done
    return 1
}

# its preparation's log goes first into the kernel suite's; a failed
# preparation is only reported: the suite does each step again and fails
# with the reason
kernel_prepared() {
    [ -n "$kernel_prepare_pid" ] || return 0
    wait "$kernel_prepare_pid" ||
        echo "kernel suite: its preparation failed (the suite retries it)"
    kernel_prepare_pid=
    grep -v '^WARNING: Location' "$FAILURES_DIR/kernel-prepare.log"
    echo "[run-tests +${SECONDS}s] kernel suite: prepared"
}

wait_for_kernel() {
    [ -n "$kernel_pid" ] || return 0
    echo "=== suite kernel (ran in the background; its output) ==="
    wait "$kernel_pid"
    local rc=$?
    kernel_pid=
    cat "$FAILURES_DIR/kernel.log"
    [ $rc -eq 0 ] || failed+=(kernel)
    took[kernel]=$(( $(cat "$FAILURES_DIR/kernel.end" 2>/dev/null ||
                       date +%s) - kernel_start ))
    echo 0 2>/dev/null > /proc/self/autogroup || true
}

# One suite: its output, then "rc took" in $FAILURES_DIR/<name>.status
# (a lane runs it in a subshell; the main shell reads the status)
run_one() {
    local name=$1 start=$SECONDS rc=0
    echo "=== suite $name (at +${SECONDS}s) ==="
    if ! present "$name"; then
        echo "suite $name: not present in this tree"
        rc=absent
    elif ! suite "$name"; then
        rc=1
        case "$name" in
            unit|cinder|ceph|prometheus)
                stestr failing > "$FAILURES_DIR/$name.txt" 2>&1 ;;
            # each partition of functional and nova keeps its own repo
            functional|nova|release-nova-*)
                for repo in .stestr-parts/"$name"-*; do
                    stestr --repo-url "$repo" failing 2>&1
                done > "$FAILURES_DIR/$name.txt" ;;
        esac
    fi
    echo "$rc $((SECONDS - start))" > "$FAILURES_DIR/$name.status"
}

record() {
    local name=$1 rc seconds
    read -r rc seconds < "$FAILURES_DIR/$name.status"
    case $rc in
        absent) absent[$name]=1 ;;
        0) ;;
        *) failed+=("$name") ;;
    esac
    took[$name]=$seconds
}

# The heavy suites after the guest (functional, nova, the older releases'
# nova flows: two /dev-isolated partitions each) leave about a third of
# the two cores idle while their tests wait on the simulated host's
# processes and timers (measured: 31 % idle for tests/nova alone). So they
# run in two lanes side by side, longest first, each lane's suites one
# after another; each lane's output is printed when both are done.
# OS_BRICK_CAS_POST_LANES=1 runs them one after another.
declare -A EXPECTED=([functional]=690 [nova]=360)
# whether these are two or more suites that may run in lanes
all_in_lanes() {
    [ $# -ge 2 ] || return 1
    local name
    for name in "$@"; do
        case $name in functional|nova|release-nova-*) ;; *) return 1 ;; esac
    done
}
run_lanes() {
    local -a lane_of=() load=(0 0) pids=()
    local name lane weight
    for name in "$@"; do
        weight=${EXPECTED[$name]:-60}
        case $name in release-nova-*) weight=330 ;; esac
        lane=0
        [ "${load[1]}" -lt "${load[0]}" ] && lane=1
        load[lane]=$((load[lane] + weight))
        lane_of+=("$lane")
    done
    for lane in 0 1; do
        (
            for index in "${!lane_of[@]}"; do
                [ "${lane_of[$index]}" = "$lane" ] || continue
                name=${*:$((index + 1)):1}
                run_one "$name" > "$FAILURES_DIR/$name.out" 2>&1
            done
        ) &
        pids+=($!)
    done
    wait "${pids[@]}"
    for index in "${!lane_of[@]}"; do
        name=${*:$((index + 1)):1}
        echo "--- (lane $((lane_of[index] + 1)) of 2) ---"
        cat "$FAILURES_DIR/$name.out"
        record "$name"
    done
}

for index in "${!SUITES[@]}"; do
    name=${SUITES[$index]}
    if [ "$name" = kernel ] && present kernel &&
            in_shadow "${SUITES[$((index + 1))]:-}"; then
        kernel_start=$(date +%s)
        kernel_prepared > "$FAILURES_DIR/kernel.log" 2>&1
        # its apt installs run now, so they never race another's apt
        tools/kernel/install-host.sh || exit 1
        echo "=== suite kernel: started in the background at +${SECONDS}s (output when it ends) ==="
        ( suite kernel; rc=$?; date +%s > "$FAILURES_DIR/kernel.end"
          exit $rc ) >> "$FAILURES_DIR/kernel.log" 2>&1 &
        kernel_pid=$!
        echo 10 2>/dev/null > /proc/self/autogroup || true
        continue
    fi
    in_shadow "$name" || wait_for_kernel
    if [ "${OS_BRICK_CAS_POST_LANES:-2}" = 2 ] &&
            all_in_lanes "${SUITES[@]:$index}"; then
        # the older releases' venvs are ready before the lanes fork:
        # each "pip install -e ." rewrites the checkout's egg-info, so two
        # must never run at once
        if [ -n "$prepare_pid" ]; then
            wait "$prepare_pid"
            prepare_pid=
            grep -v '^WARNING: Location' "$FAILURES_DIR/prepare-venvs.log"
        fi
        for later in "${SUITES[@]:$index}"; do
            case $later in
                release-nova-*)
                    release=${later#release-nova-}
                    VENV=.venv-$release \
                        UPPER_CONSTRAINTS_FILE="tools/upper-constraints-$release.txt" \
                        tools/setup-env.sh && READY[$release]=1 ;;
            esac
        done
        run_lanes "${SUITES[@]:$index}"
        break
    fi
    [ "$name" = kernel ] && kernel_prepared
    run_one "$name"
    record "$name"
done
wait_for_kernel
for name in "${failed[@]:-}"; do
    [ -s "$FAILURES_DIR/$name.txt" ] || continue
    echo "=== failing tests of suite $name (stestr failing, last 120 lines) ==="
    tail -n 120 "$FAILURES_DIR/$name.txt"
done
echo "=== summary (all done at +${SECONDS}s) ==="
for name in "${SUITES[@]}"; do
    status=passed
    [ -n "${absent[$name]:-}" ] && status=absent
    for f in "${failed[@]:-}"; do [ "$f" = "$name" ] && status=FAILED; done
    printf '%-21s %-7s %4ss\n' "$name" "$status" "${took[$name]:-0}"
done
# the failing tests' names once more, last: a log cut to its head and
# tail still says which tests failed
for name in "${failed[@]:-}"; do
    [ -s "$FAILURES_DIR/$name.txt" ] || continue
    grep -E '^(FAIL|ERROR):? ' "$FAILURES_DIR/$name.txt" | sort -u |
        head -n 15 | sed "s/^/$name: /"
done
[ ${#failed[@]} -eq 0 ]
