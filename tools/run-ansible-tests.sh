#!/bin/bash
# The os_brick_cas Ansible role (deploy/ansible/roles/) on the real
# kernel: its build tasks build Open CAS on this host against the guest
# kernel's headers (tools/kernel/ansible-build.yml, twice: the second run
# must change nothing), then the real-kernel guest boots without Open CAS,
# the role provisions it with connection local from that build
# (tools/kernel/ansible-guest.yml, twice), and tests/kernel/test_provisioned
# (doctor, host apply twice, host check after a hand-changed cleaning
# policy) and tests/kernel/test_attach run on that host. About 10 min with
# the build cached (+2.5 min for a new kernel or tarball).
#   tools/run-ansible-tests.sh [test ids]   # default: test_provisioned test_attach
# Environment: OS_BRICK_CAS_OPENCAS_TARBALL (default: the newest in
# ../shared/vendor/open-cas/), VENV (the product's, default .venv), and
# those of tools/run-kernel-tests.sh. Takes /tmp/os-brick-cas-qemu.lock
# while the guest runs (one TCG guest at a time on this machine).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
fail() { echo "ansible role test FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (the build, and the guest)"
venv=$(tools/ansible-venv.sh) || fail "no ansible virtualenv"
[ $# -gt 0 ] || set -- test_provisioned test_attach
# two plays and doctor before the tests
export OS_BRICK_CAS_KERNEL_TIMEOUT=${OS_BRICK_CAS_KERNEL_TIMEOUT:-1800}
OS_BRICK_CAS_KERNEL_ANSIBLE_VENV=$venv \
    flock /tmp/os-brick-cas-qemu.lock tools/run-kernel-tests.sh "$@"
