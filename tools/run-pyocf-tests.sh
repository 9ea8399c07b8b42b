#!/bin/bash
# The pyocf suite: tests/pyocf (the LOOKUP_HIT_INVALID resume race,
# issue 33; and test_wt_fast_path.py, what doctor's use_io_scheduler
# check rests on) run by OCF's own userspace framework (pyocf, ocf/tests/
# functional of the Open CAS release tarball), built twice: unpatched and
# with the os_brick_cas role's patch series for that release. Passes only
# if every reproducer FAILS on the unpatched build (the tests detect the
# defect) and PASSES on the patched one (the series fixes it); prints the
# stale and lost blocks per case and build.
#   tools/run-pyocf-tests.sh
# Environment:
#   OS_BRICK_CAS_OPENCAS_TARBALL  release tarball (default: the newest
#                                 open-cas-linux-v26.03.*.tar.xz in
#                                 ../shared/vendor/open-cas/)
#   OS_BRICK_CAS_PYOCF_CACHE      where the builds are kept (default:
#                                 $XDG_CACHE_HOME/os-brick-cas/pyocf, else
#                                 /var/cache/os-brick-cas/pyocf), one
#                                 directory per <release>-<series hash>
#                                 (unpatched: <release>-none) and a venv
#                                 with pytest
#   OS_BRICK_CAS_PYOCF_LINES      cache lines raced per case (default 64)
# Needs gcc, make, patch, xz-utils and zlib's headers (zlib1g-dev), and
# PyPI (pytest) for the first run. Cold (two builds): about 2-3 minutes
# nice'd on 2 busy cores; warm: under a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
fail() { echo "pyocf suite FAILED: $*" >&2; exit 1; }
note() { echo "[pyocf $SECONDS s] $*"; }
PYTEST_VERSION=9.0.3

if [ -n "${XDG_CACHE_HOME:-}" ]; then
    cache=${OS_BRICK_CAS_PYOCF_CACHE:-$XDG_CACHE_HOME/os-brick-cas/pyocf}
else
    cache=${OS_BRICK_CAS_PYOCF_CACHE:-/var/cache/os-brick-cas/pyocf}
fi
mkdir -p "$cache" || fail "cannot create $cache"
cache=$(realpath "$cache")

for tool in gcc make patch xz flock; do
    command -v "$tool" >/dev/null || fail "$tool missing (tools/install-system-packages.sh)"
done
[ -e /usr/include/zlib.h ] || fail "zlib.h missing: install zlib1g-dev (tools/install-system-packages.sh)"

# -- the release tarball (as tools/run-kernel-tests.sh finds it) ----------
tarball=${OS_BRICK_CAS_OPENCAS_TARBALL:-}
if [ -z "$tarball" ]; then
    for repo in "$checkout" "$(dirname "$(git -C "$checkout" rev-parse \
            --path-format=absolute --git-common-dir 2>/dev/null || echo .)")"; do
        if [ -d "$repo/../shared/vendor/open-cas" ]; then
            tarball=$(find "$(realpath "$repo/../shared/vendor/open-cas")" \
                -maxdepth 1 -name 'open-cas-linux-v26.03.*.tar.xz' |
                sort -V | tail -n 1)
            break
        fi
    done
    [ -n "$tarball" ] || fail "no open-cas-linux-v26.03.*.tar.xz in ../shared/vendor/open-cas/ beside $checkout or its main working tree (set OS_BRICK_CAS_OPENCAS_TARBALL)"
fi
tarball=$(realpath "$tarball")
release=$(basename "$tarball" .tar.xz)
release=${release#open-cas-linux-}
patches_dir=$checkout/deploy/ansible/roles/os_brick_cas/files/opencas-patches/$release
[ -f "$patches_dir/series" ] || fail "no patch series for $release ($patches_dir/series)"
mapfile -t series < <(sed -e 's/#.*//' "$patches_dir/series" | awk 'NF {print $1}')
[ ${#series[@]} -gt 0 ] || fail "$patches_dir/series lists no patch"
tarball_sum=$(sha256sum "$tarball" | cut -c1-64)
series_hash=$(cd "$patches_dir" && cat "${series[@]}" | sha256sum | cut -c1-12)

# -- pytest, in its own venv (pyocf needs nothing else) -------------------
venv=$cache/venv-pytest-$PYTEST_VERSION
if [ ! -x "$venv/bin/pytest" ]; then
    note "installing pytest==$PYTEST_VERSION into $venv"
    rm -rf "$venv"
    { python3 -m venv "$venv" &&
      "$venv/bin/pip" install -q "pytest==$PYTEST_VERSION"; } ||
        { rm -rf "$venv"; fail "could not install pytest==$PYTEST_VERSION from PyPI"; }
fi

# -- the two builds, cached -----------------------------------------------
# build NAME PATCH...: unpack, apply the patches (patch -p1 at the top of
# the release tree, as the role does), make pyocf's libocf.so; prints the
# ocf/tests/functional directory
build() {
    local name=$1; shift
    local dir=$cache/$release-$name
    if [ -f "$dir/.complete" ] && [ "$(cat "$dir/.complete")" = "$tarball_sum" ]; then
        echo "$dir/ocf/tests/functional"
        return 0
    fi
    rm -rf "$dir"
    local work
    work=$(mktemp -d "$cache/.build-$release-$name-XXXX")
    local start=$SECONDS
    note "building pyocf for $release ($name)" >&2
    # the whole release tree (22 MB built): the series' paths start at
    # its top, as the role applies them
    nice -n 19 tar -xJf "$tarball" -C "$work" --strip-components=1 ||
        { rm -rf "$work"; fail "cannot unpack $tarball"; }
    local p
    for p in "$@"; do
        (cd "$work" && patch -p1 --forward --batch --quiet -i "$patches_dir/$p") ||
            { rm -rf "$work"; fail "$p does not apply to $release"; }
    done
    nice -n 19 make -C "$work/ocf/tests/functional" -j "$(nproc)" \
        LDFLAGS="-pthread -lz" > "$work/build.log" 2>&1 ||
        { tail -n 30 "$work/build.log" >&2; rm -rf "$work"; fail "pyocf did not build ($name)"; }
    echo "$tarball_sum" > "$work/.complete"
    mv "$work" "$dir"
    note "built $dir in $((SECONDS - start)) s" >&2
    echo "$dir/ocf/tests/functional"
}
# one build at a time per cache (another checkout may be building)
exec 9>"$cache/.lock"
flock 9
unpatched=$(build none)
patched=$(build "$series_hash" "${series[@]}")
flock -u 9

# -- run tests/pyocf against each ------------------------------------------
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
run() {
    local name=$1 tree=$2
    note "tests/pyocf on $release $name"
    # libocf.so is built with -coverage: its .gcda files go to the run's
    # directory, and no bytecode is written: the cached build stays as built
    (cd tests/pyocf &&
     GCOV_PREFIX=$results/gcov-$name PYTHONPATH=$tree PYTHONDONTWRITEBYTECODE=1 \
         OS_BRICK_CAS_PYOCF_RESULTS=$results/$name.txt \
         timeout 600 nice -n 19 "$venv/bin/python" -m pytest -q \
             -p no:cacheprovider -p no:logging --rootdir . \
             test_hit_invalid_race.py) > "$results/$name.log" 2>&1
}
rc_unpatched=0; run unpatched "$unpatched" || rc_unpatched=$?
rc_patched=0; run patched "$patched" || rc_patched=$?

echo "--- pyocf reproducers, Open CAS $release (patched: ${series[*]}) ---"
for name in unpatched patched; do
    sed "s/^pyocf-race /$name: /" "$results/$name.txt" 2>/dev/null || true
    grep -E '^(FAILED|ERROR|[0-9]+ (passed|failed))|[0-9]+ (passed|failed)' \
        "$results/$name.log" | sed "s/^/$name: /" || true
done
# every case reported, every read raced (waited for the write), every case
# lost or read stale blocks unpatched, none patched
verdict() {
    local cases
    cases=$(cd tests/pyocf && GCOV_PREFIX=$results/gcov PYTHONPATH=$patched \
        PYTHONDONTWRITEBYTECODE=1 \
        "$venv/bin/python" -m pytest -q --collect-only -p no:cacheprovider \
        --rootdir . test_hit_invalid_race.py | grep -c '::')
    for name in unpatched patched; do
        [ "$(wc -l < "$results/$name.txt" 2>/dev/null || echo 0)" -eq "$cases" ] ||
            { echo "$name: not every case reported figures (see below)"; return 1; }
        if grep -v -E 'lines=([0-9]+) read_waited=\1 ' "$results/$name.txt"; then
            echo "$name: some reads did not wait for the write: the race was not set up"
            return 1
        fi
    done
    [ "$rc_unpatched" -ne 0 ] ||
        { echo "the reproducers PASSED on unpatched $release: they do not detect the defect"; return 1; }
    if grep -E 'stale_blocks=0 lost_blocks=0$' "$results/unpatched.txt"; then
        echo "these cases lost nothing on unpatched $release: they do not detect the defect"
        return 1
    fi
    [ "$rc_patched" -eq 0 ] ||
        { echo "the reproducers FAILED with the series applied"; return 1; }
}
if ! verdict; then
    for name in unpatched patched; do
        echo "--- $name: pytest output (last 60 lines) ---"
        tail -n 60 "$results/$name.log"
    done
    fail "see above"
fi
note "every reproducer fails on unpatched $release and passes with its series"
# -- what doctor's use_io_scheduler check rests on (passes while OCF puts
# wt/wa write hits on its write-back fast path when use_submit_io_fast)
note "tests/pyocf/test_wt_fast_path.py on $release patched"
(cd tests/pyocf &&
 GCOV_PREFIX=$results/gcov-fast PYTHONPATH=$patched PYTHONDONTWRITEBYTECODE=1 \
     timeout 300 nice -n 19 "$venv/bin/python" -m pytest -q \
         -p no:cacheprovider -p no:logging --rootdir . \
         test_wt_fast_path.py) > "$results/fast-path.log" 2>&1 ||
    { tail -n 60 "$results/fast-path.log"
      fail "test_wt_fast_path.py failed: does $release still send wt/wa write hits down the write-back fast path? (see doctor's use_io_scheduler check)"; }
note "wt and wa write hits stay dirty with use_submit_io_fast, as doctor's use_io_scheduler check assumes"
