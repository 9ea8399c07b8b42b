#!/bin/bash
# Debian's Ceph (mon, osd, CLI, rbd-fuse) for the real-Ceph test tier, and
# the python rados/rbd bindings made importable from a venv.
#   tools/install-ceph.sh [VENV]
#   tools/install-ceph.sh --packages-only   # no venv touched
# Idempotent. The bindings are exposed through a .pth file pointing at a
# directory holding only symlinks to Debian's rados/rbd extension modules,
# so no other Debian package leaks into the venv.
set -euo pipefail
venv=${1:-.venv}
need=()
for tool in ceph-mon ceph-osd ceph rbd rbd-fuse monmaptool; do
    command -v "$tool" >/dev/null || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ] || ! ls /usr/lib/python3/dist-packages/rados*.so \
        >/dev/null 2>&1; then
    SUDO=
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends ceph-mon ceph-osd \
        ceph-common rbd-fuse python3-rados python3-rbd fuse3 >/dev/null
fi
[ "$venv" != --packages-only ] && [ -d "$venv" ] || exit 0
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
bindings="$site/../os-brick-cas-ceph-bindings"
mkdir -p "$bindings"
for so in /usr/lib/python3/dist-packages/rados*.so \
          /usr/lib/python3/dist-packages/rbd*.so; do
    [ -e "$so" ] && ln -sf "$so" "$bindings/"
done
(cd "$bindings" && pwd) > "$site/os-brick-cas-ceph-bindings.pth"
"$venv/bin/python" -c 'import rados, rbd' || {
    echo "rados/rbd bindings not importable from $venv" >&2; exit 1; }
