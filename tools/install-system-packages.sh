#!/bin/bash
# Debian packages the tests use: fio (bench), shellcheck (pep8), libvirt's
# schema validator (nova guest XML), promtool (the alert rules' tests); what
# the real-Ceph tier needs is installed by tools/install-ceph.sh.
# Idempotent; skips what is present.
set -euo pipefail
need=()
command -v fio >/dev/null || need+=(fio)
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v virt-xml-validate >/dev/null || need+=(libvirt-clients libxml2-utils)
command -v losetup >/dev/null || need+=(mount)
command -v promtool >/dev/null || need+=(prometheus)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
