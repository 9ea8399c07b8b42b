#!/bin/bash
# Host packages of the real-kernel tier, from apt: qemu, Debian's current
# kernel image with its headers (the guest kernel and what Open CAS builds
# against), busybox-static (virtme-ng's initramfs), Ceph (tools/install-
# ceph.sh), and for tests/kernel/test_libvirt.py the libvirtd the guest
# runs (no libvirt-daemon-system: no systemd units, no /etc/libvirt/
# qemu.conf) with libvirt-dev and pkg-config to build libvirt-python;
# bcache-tools (make-bcache), fio and dmsetup for benchmarks/peers.py.
# Idempotent.
#   tools/kernel/install-host.sh                  # install what is missing
#   tools/kernel/install-host.sh --packages-only  # the same, but leave the
#                                                 # venv's Ceph bindings alone
#                                                 # (one being built beside it)
#   tools/kernel/install-host.sh --kernel-version # print the guest kernel
set -euo pipefail
cd "$(dirname "$0")/../.."
kernel_version() {
    # linux-image-amd64 depends on the versioned image, e.g.
    # linux-image-6.1.0-56-amd64 (| linux-image-6.1.0-56-amd64-unsigned)
    dpkg-query -W -f '${Depends}' linux-image-amd64 2>/dev/null |
        sed -n 's/^linux-image-\([^ ,|]*\).*/\1/p'
}
if [ "${1:-}" = --kernel-version ]; then
    kver=$(kernel_version)
    [ -n "$kver" ] && echo "$kver"
    exit $?
fi
need=()
for pkg in qemu-system-x86 linux-image-amd64 linux-headers-amd64 \
           busybox-static libvirt-daemon libvirt-daemon-driver-qemu \
           libvirt-clients qemu-utils libvirt-dev pkg-config \
           bcache-tools fio dmsetup; do
    dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null |
        grep -q 'install ok installed' || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
kver=$(kernel_version)
[ -d "/lib/modules/$kver/build" ] || {
    echo "headers of $kver missing: apt-get install linux-headers-$kver" >&2
    exit 1; }
if [ "${1:-}" = --packages-only ]; then
    tools/install-ceph.sh --packages-only
else
    tools/install-ceph.sh "${VENV:-.venv}"
fi
