#!/bin/bash
# Debian packages the tests use: fio (bench), shellcheck (pep8), libvirt's
# schema validator (nova guest XML), promtool (the alert rules' tests), a
# C toolchain, patch and zlib's headers (the pyocf suite builds OCF's
# libocf.so: tools/run-pyocf-tests.sh); what
# the real-Ceph tier needs is installed by tools/install-ceph.sh.
# Idempotent; skips what is present.
set -euo pipefail
need=()
command -v fio >/dev/null || need+=(fio)
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v virt-xml-validate >/dev/null || need+=(libvirt-clients libxml2-utils)
command -v losetup >/dev/null || need+=(mount)
command -v promtool >/dev/null || need+=(prometheus)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v make >/dev/null || need+=(make)
command -v patch >/dev/null || need+=(patch)
command -v xz >/dev/null || need+=(xz-utils)
[ -e /usr/include/zlib.h ] || need+=(zlib1g-dev)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
