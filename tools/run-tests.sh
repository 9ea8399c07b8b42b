#!/bin/bash
# The whole test suite, as CI runs it:
#   tools/run-tests.sh                 # every suite
#   tools/run-tests.sh unit functional # only these
# Suites: pep8 unit functional nova cinder ceph tempest devstack docs
#         releasenotes. Each runs even if an earlier one failed; the exit
# status is non-zero if any failed. Needs root for the system packages
# (Ceph, fio, rbd-fuse, shellcheck) and for the /dev entries the host
# simulator creates.
set -uo pipefail
cd "$(dirname "$0")/.."
ALL=(pep8 unit functional nova cinder ceph tempest devstack docs releasenotes)
SUITES=("$@")
[ ${#SUITES[@]} -eq 0 ] && SUITES=("${ALL[@]}")

tools/setup-env.sh || exit 1
tools/install-system-packages.sh || exit 1
tools/install-ceph.sh "$PWD/.venv" || exit 1
export PATH="$PWD/.venv/bin:$PATH"
export OS_BRICK_CAS_REQUIRE_CEPH=${OS_BRICK_CAS_REQUIRE_CEPH:-1}

stestr_run() {
    local path=$1; shift
    stestr --test-path "$path" --top-dir ./ run "$@"
}

suite() {
    case "$1" in
        pep8)
            flake8 && shellcheck devstack/plugin.sh devstack/settings \
                devstack/lib/* tools/*.sh ;;
        unit) stestr_run tests/unit ;;
        functional) stestr_run tests/functional --concurrency 1 ;;
        nova) stestr_run tests/nova --concurrency 1 ;;
        cinder) stestr_run tests/cinder ;;
        ceph) stestr_run tests/ceph --concurrency 1 ;;
        tempest) tools/check-tempest-plugin.sh ;;
        devstack) tools/test-devstack-plugin.sh ;;
        docs) tools/build-docs.sh ;;
        releasenotes) tools/build-releasenotes.sh ;;
        *) echo "unknown suite $1 (known: ${ALL[*]})"; return 2 ;;
    esac
}

failed=()
declare -A took
for name in "${SUITES[@]}"; do
    echo "=== suite $name ==="
    start=$SECONDS
    if ! suite "$name"; then
        failed+=("$name")
    fi
    took[$name]=$((SECONDS - start))
done
echo "=== summary ==="
for name in "${SUITES[@]}"; do
    status=passed
    for f in "${failed[@]:-}"; do [ "$f" = "$name" ] && status=FAILED; done
    printf '%-14s %-7s %4ss\n' "$name" "$status" "${took[$name]}"
done
[ ${#failed[@]} -eq 0 ]
