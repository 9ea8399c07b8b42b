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
tools/kernel/install-host.sh || fail "could not install the host packages"
kver=$(tools/kernel/install-host.sh --kernel-version) || fail "no guest kernel"
tarball=${OS_BRICK_CAS_OPENCAS_TARBALL:-}
if [ -z "$tarball" ]; then
    tarball=$(find ../shared/vendor/open-cas/ \
              -maxdepth 1 -name 'open-cas-linux-v*.tar.xz' 2>/dev/null |
              sort -V | tail -n 1)
fi
[ -r "$tarball" ] || fail "no Open CAS tarball (set OS_BRICK_CAS_OPENCAS_TARBALL)"
if [ -n "${XDG_CACHE_HOME:-}" ]; then
    cache=${OS_BRICK_CAS_KERNEL_CACHE:-$XDG_CACHE_HOME/os-brick-cas}
else
    cache=${OS_BRICK_CAS_KERNEL_CACHE:-/var/cache/os-brick-cas}
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 ANSIBLE_ROLES_PATH=$PWD/deploy/ansible/roles
for run in 1 2; do
    echo "[ansible] the role's build tasks for kernel $kver (run $run)"
    "$venv/bin/ansible-playbook" -i localhost, -c local tools/kernel/ansible-build.yml \
        -e "os_brick_cas_opencas_kernel=$kver" \
        -e "os_brick_cas_opencas_tarball=$(realpath "$tarball")" \
        -e "os_brick_cas_opencas_build_root=$cache/ansible-opencas" \
        -e "os_brick_cas_root_file=$work/root" > "$work/build-$run.log" 2>&1 ||
        { cat "$work/build-$run.log"; fail "the role's build tasks failed"; }
    grep -A1 '^PLAY RECAP' "$work/build-$run.log" | tail -n 1
done
grep -Eq '^localhost +: .*changed=0 .*failed=0' "$work/build-2.log" ||
    fail "the second run of the build tasks changed something"
root=$(cat "$work/root")
[ $# -gt 0 ] || set -- test_provisioned test_attach
# two plays (depmod alone takes ~90 s under TCG) before the tests
export OS_BRICK_CAS_KERNEL_TIMEOUT=${OS_BRICK_CAS_KERNEL_TIMEOUT:-1800}
OS_BRICK_CAS_KERNEL_ANSIBLE_VENV=$venv OS_BRICK_CAS_KERNEL_OPENCAS_ROOT=$root \
    flock /tmp/os-brick-cas-qemu.lock tools/run-kernel-tests.sh "$@"
