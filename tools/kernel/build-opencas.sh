#!/bin/bash
# Build Open CAS Linux from a release tarball for one kernel with the
# os_brick_cas role's own build tasks (deploy/ansible/roles/os_brick_cas/
# tasks/build.yml, through tools/kernel/ansible-build.yml, connection
# local), so every run of the real-kernel tier runs them against the guest
# kernel's headers. ansible-core comes from tools/ansible-venv.sh (PyPI).
#   tools/kernel/build-opencas.sh TARBALL KERNEL_VERSION CACHE_DIR
# Prints the role's staging root on the last line of stdout:
#   ROOT/files/ mirrors / (lib/modules/KVER/extra/block/opencas/cas_cache.ko,
#   sbin/casadm, lib/opencas/, lib/udev/rules.d/, usr/lib/opencas/
#   os-brick-cas-build.json, ...), ROOT/VERSION.
# OS_BRICK_CAS_OPENCAS_PATCHES=none builds without the role's patch series
# (the reproducers' by-name runs on the unpatched release); unset or
# "series": the series of the tarball's release (the default, CI's build).
# Staging roots are kept in CACHE_DIR/ansible-opencas/, keyed by the
# kernel version, the tarball's sha256 and the patches' hash (the role's
# build_root naming): a
# cached build is a ~10 s run that must change nothing, and a fresh build
# (~4.5 min on 2 cores) is followed by a second run that must change
# nothing, so the tasks' idempotence is checked on every run.
set -euo pipefail
tarball=$1
kver=$2
cache=$3
cd "$(dirname "$0")/../.."
[ -r "$tarball" ] || { echo "Open CAS tarball $tarball not readable" >&2; exit 1; }
ansible_venv=$(tools/ansible-venv.sh)
case "${OS_BRICK_CAS_OPENCAS_PATCHES:-series}" in
    series) patches='{"os_brick_cas_opencas_patches": "series"}' ;;
    none) patches='{"os_brick_cas_opencas_patches": []}' ;;
    *) echo "OS_BRICK_CAS_OPENCAS_PATCHES must be series or none" >&2; exit 1 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 ANSIBLE_ROLES_PATH=$PWD/deploy/ansible/roles
build() {
    "$ansible_venv/bin/ansible-playbook" -i localhost, -c local \
        tools/kernel/ansible-build.yml \
        -e "os_brick_cas_opencas_kernel=$kver" -e "$patches" \
        -e "os_brick_cas_opencas_tarball=$(realpath "$tarball")" \
        -e "os_brick_cas_opencas_build_root=$cache/ansible-opencas" \
        -e "os_brick_cas_root_file=$work/root" > "$work/build-$1.log" 2>&1 ||
        { tail -n 40 "$work/build-$1.log" >&2
          echo "the role's build tasks failed for kernel $kver ($(basename "$tarball"))" >&2
          return 1; }
    echo "[build-opencas] run $1: $(grep -A1 '^PLAY RECAP' "$work/build-$1.log" | tail -n 1)" >&2
    grep -Eq '^localhost +: .*changed=0 .*failed=0' "$work/build-$1.log"
}
start=$SECONDS
echo "[build-opencas] Open CAS $(basename "$tarball") for kernel $kver, patches: ${OS_BRICK_CAS_OPENCAS_PATCHES:-series}, with the role's build tasks (cold: ~4.5 min)" >&2
if ! build 1; then
    [ -s "$work/root" ] || exit 1
    # it built (or something changed): a second run must change nothing
    build 2 || { echo "the second run of the role's build tasks changed something" >&2; exit 1; }
fi
root=$(cat "$work/root")
[ -f "$root/.complete" ] || { echo "no finished staging root at $root" >&2; exit 1; }
echo "[build-opencas] staging root $root ($((SECONDS - start)) s)" >&2
echo "$root"
