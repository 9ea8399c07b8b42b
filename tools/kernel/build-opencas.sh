#!/bin/bash
# Build Open CAS Linux from a release tarball for one kernel, into a
# staging root kept in a cache (reused when kernel and sources match).
#   tools/kernel/build-opencas.sh TARBALL KERNEL_VERSION CACHE_DIR
# Prints the staging root on its last line of stdout:
#   ROOT/lib/modules/KVER/extra/cas_cache.ko, ROOT/sbin/casadm,
#   ROOT/lib/opencas/ (casctl, opencas.py), ROOT/lib/udev/rules.d/,
#   ROOT/VERSION (the release's version line) and ROOT/build.log.
# The cache key is the kernel version plus the tarball's sha256, so a new
# kernel ABI or another source tree builds afresh. Nothing is installed on
# the build machine: Open CAS's own 'make install' runs depmod, udevadm and
# systemctl here, so the files are staged by hand (see
# ../shared/docs/real-kernel-notes.md, section 3).
set -euo pipefail
tarball=$1
kver=$2
cache=$3
[ -r "$tarball" ] || { echo "Open CAS tarball $tarball not readable" >&2; exit 1; }
kdir=/lib/modules/$kver/build
[ -d "$kdir" ] || { echo "no kernel headers for $kver ($kdir missing): install linux-headers-$kver" >&2; exit 1; }
sha=$(sha256sum "$tarball" | cut -c1-16)
name=$(basename "$tarball" .tar.xz)
root=$cache/opencas/$name-$kver-$sha
if [ -f "$root/.complete" ]; then
    echo "Open CAS $name for $kver: cached build $root" >&2
    echo "$root"
    exit 0
fi
mkdir -p "$cache/opencas"
work=$(mktemp -d "$cache/opencas/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir "$src"
tar -C "$src" --strip-components=1 -xJf "$tarball"
log=$work/build.log
# A 'git archive' tree has neither .git nor .metadata/cas_version, and
# tools/cas_version_gen.sh then aborts; write the file a release tarball
# carries, from the release's own 'version' file (build 0, "release").
if [ ! -f "$src/.metadata/cas_version" ]; then
    # shellcheck disable=SC1091
    . "$src/version"
    mkdir -p "$src/.metadata"
    {
        echo "CAS_VERSION_MAIN=$CAS_VERSION_MAIN"
        echo "CAS_VERSION_MAJOR=$CAS_VERSION_MAJOR"
        echo "CAS_VERSION_MINOR=$CAS_VERSION_MINOR"
        echo "CAS_VERSION_BUILD=0"
        echo "CAS_VERSION_RELEASE=release"
        printf 'CAS_VERSION=%02d.%02d.%01d.0000.release\n' \
            "$((10#$CAS_VERSION_MAIN))" "$((10#$CAS_VERSION_MAJOR))" \
            "$((10#$CAS_VERSION_MINOR))"
    } > "$src/.metadata/cas_version"
fi
# both are needed: configure and modules/Makefile default to `uname -r`
export KERNEL_DIR=$kdir KERNEL_VERSION=$kver
echo "Building Open CAS $name for kernel $kver (configure ~2 min, make ~30 s; log: $log)" >&2
start=$SECONDS
if ! (cd "$src" && ./configure && make -j"$(nproc)") > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "Open CAS $name does not build for kernel $kver (full log above: $log)" >&2
    cp "$log" "$cache/opencas/$name-$kver-$sha.failed.log"
    exit 1
fi
stage=$work/root
install -D -m 644 "$src/modules/cas_cache/cas_cache.ko" \
    "$stage/lib/modules/$kver/extra/cas_cache.ko"
strip --strip-debug "$stage/lib/modules/$kver/extra/cas_cache.ko"
install -D -m 755 "$src/casadm/casadm" "$stage/sbin/casadm"
(cd "$src/utils" && make install_files DESTDIR="$stage") >> "$log" 2>&1
grep -h '^CAS_VERSION=' "$src/.metadata/cas_version" | cut -d= -f2 > "$stage/VERSION"
cp "$log" "$stage/build.log"
echo "built in $((SECONDS - start)) s" >> "$stage/build.log"
touch "$stage/.complete"
rm -rf "$root"
mv "$stage" "$root"
echo "Open CAS $name for $kver built in $((SECONDS - start)) s: $root" >&2
echo "$root"
