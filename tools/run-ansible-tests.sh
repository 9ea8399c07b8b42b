#!/bin/bash
# The os_brick_cas Ansible role (deploy/ansible/roles/) on the real
# kernel: tools/run-kernel-tests.sh builds Open CAS on this host against
# the guest kernel's headers with the role's build tasks (as every kernel
# suite run does: tools/kernel/build-opencas.sh), then the real-kernel
# guest boots without Open CAS, the role provisions it with connection
# local from that build (tools/kernel/ansible-guest.yml, twice), and
# tests/kernel/test_provisioned (the second play changed nothing, doctor,
# host apply again, host check after a hand-changed cleaning policy) and
# tests/kernel/test_attach run on that host.
#   tools/run-ansible-tests.sh [test ids]   # default: test_provisioned test_attach
#   tools/run-ansible-tests.sh --whole-tier # all of tests/kernel on that host
#                                           # (the kernel suite of CI)
# Environment: those of tools/run-kernel-tests.sh. Takes
# /tmp/os-brick-cas-qemu.lock (one TCG guest at a time on this machine).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
fail() { echo "ansible role test FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (the build, and the guest)"
venv=$(tools/ansible-venv.sh) || fail "no ansible virtualenv"
if [ "${1:-}" = --whole-tier ]; then
    shift
    [ $# -eq 0 ] || fail "--whole-tier takes no test ids"
elif [ $# -eq 0 ]; then
    set -- test_provisioned test_attach
fi
# two plays before the tests: 680 s and 320 s under TCG on 2 busy cores
# (run 20261127-082326-tCzo, the install one copy per staged directory)
# 2026-11-28: with the patched-v26.03 reproducers in the default run and
# the suite beside the others (run-tests.sh), the plays alone took ~30 min
# of a shared machine: 70 min for the guest
export OS_BRICK_CAS_KERNEL_TIMEOUT=${OS_BRICK_CAS_KERNEL_TIMEOUT:-4200}
OS_BRICK_CAS_KERNEL_ANSIBLE_VENV=$venv \
    flock /tmp/os-brick-cas-qemu.lock tools/run-kernel-tests.sh "$@"
