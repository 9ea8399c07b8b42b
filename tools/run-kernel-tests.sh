#!/bin/bash
# The real-kernel tier: tests/kernel run inside a qemu guest booted from
# Debian's linux-image-amd64 with virtme-ng, against the real krbd and the
# real Open CAS kernel module (built from a release tarball), a one-node
# Ceph in the guest, systemd-udevd with the product's udev rule.
#   tools/run-kernel-tests.sh                # tests/kernel, all of it
#   tools/run-kernel-tests.sh test_busy ...  # only these modules / test ids
#   tools/run-kernel-tests.sh --probe        # set the guest up, run nothing
#   tools/run-kernel-tests.sh --prepare      # host packages, virtme-ng and
#                                            # the Open CAS build only (no
#                                            # venv needed; what a later run
#                                            # then finds in its cache)
#   tools/run-kernel-tests.sh --bench [ARGS] # benchmarks/kernel.py run ARGS
#                                            # (figures, not tests; results
#                                            # in bench.txt / bench.json)
#   tools/run-kernel-tests.sh --bench-peers [ARGS] # benchmarks/peers.py run
#                                            # ARGS: Open CAS against bcache,
#                                            # dm-cache, dm-writecache (peers.
#                                            # json / peers.txt; --dry-run,
#                                            # --quick)
# Environment:
#   OS_BRICK_CAS_OPENCAS_TARBALL  Open CAS release tarball to build (default:
#                                 the newest in ../shared/vendor/open-cas/)
#   OS_BRICK_CAS_OPENCAS_RELEASE  instead, a release of that directory
#                                 (e.g. v24.9: open-cas-linux-v24.9.tar.xz)
#   OS_BRICK_CAS_OPENCAS_PATCHES  none: build without the role's patch
#                                 series (default: the release's series;
#                                 tools/kernel/build-opencas.sh)
#   OS_BRICK_CAS_RACE_PASSES      passes per test_reader_race test (3;
#                                 also _MIB, _WIDE_LINES: its sizes)
#   OS_BRICK_CAS_ROLE_RUNS        plays of the role in provision mode (2)
#   OS_BRICK_CAS_KERNEL_CACHE     build and virtme-ng cache (default:
#                                 $XDG_CACHE_HOME/os-brick-cas, else
#                                 /var/cache/os-brick-cas)
#   OS_BRICK_CAS_KERNEL_TIMEOUT   seconds the guest may run (default 1200)
#   OS_BRICK_CAS_KERNEL_MEMORY    guest memory (default 2G)
#   OS_BRICK_CAS_KERNEL_RESULTS   where the guest's results go (default: a
#                                 new directory under the cache)
#   OS_BRICK_CAS_KERNEL_ANSIBLE_VENV  an ansible-core virtualenv: the guest
#                                 is provisioned by the os_brick_cas
#                                 role (tools/run-ansible-tests.sh sets it)
#   OS_BRICK_CAS_KERNEL_RECORD=1  copy the golden casadm outputs the tests
#                                 saw into tests/data/real-casadm/<version>/
# Needs root (apt, and the guest's kernel modules) and the project's venv
# (.venv, tools/setup-env.sh). When the guest cannot run, this FAILS with
# the reason; it never skips. qemu is stopped by its process group on exit
# and nothing of Ceph runs on the host (the cluster lives in the guest).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
checkout=$PWD
fail() { echo "kernel tier FAILED: $*" >&2; exit 1; }
note() { echo "[kernel $((SECONDS))s] $*"; }

mode=tests
case "${1:-}" in
    --probe) mode=probe; shift ;;
    --prepare) mode=prepare; shift ;;
    --bench) mode=bench; shift ;;
    --bench-peers) mode=bench-peers; shift ;;
esac
[ "$(id -u)" -eq 0 ] || fail "needs root (apt-get, and it runs qemu)"
venv=${VENV:-$checkout/.venv}
[ "$mode" = prepare ] || [ -x "$venv/bin/python" ] ||
    fail "no virtualenv at $venv (run tools/setup-env.sh)"
if [ -n "${XDG_CACHE_HOME:-}" ]; then
    cache=${OS_BRICK_CAS_KERNEL_CACHE:-$XDG_CACHE_HOME/os-brick-cas}
else
    cache=${OS_BRICK_CAS_KERNEL_CACHE:-/var/cache/os-brick-cas}
fi
mkdir -p "$cache" || fail "cannot create cache directory $cache"

# -- host packages: qemu, the current Debian kernel + headers, busybox ----
if [ "$mode" = prepare ]; then
    # the project's venv may be under construction beside this
    tools/kernel/install-host.sh --packages-only
else
    tools/kernel/install-host.sh
fi || fail "could not install the host packages"
kver=$(tools/kernel/install-host.sh --kernel-version) ||
    fail "cannot tell the version of linux-image-amd64"
vmlinuz=/boot/vmlinuz-$kver
[ -r "$vmlinuz" ] || fail "$vmlinuz missing (linux-image-$kver not installed)"
vng_venv=$cache/virtme-ng-1.42
if [ ! -x "$vng_venv/bin/vng" ]; then
    note "installing virtme-ng==1.42 into $vng_venv"
    if ! { python3 -m venv "$vng_venv" &&
           "$vng_venv/bin/pip" install -q virtme-ng==1.42; }; then
        rm -rf "$vng_venv"
        fail "could not install virtme-ng==1.42 from PyPI"
    fi
fi

# libvirt's Python binding for tests/kernel/test_libvirt.py's nova driver,
# built against the host's libvirt 9.0 (libvirt-dev); only this tier needs
# it, so it is added here rather than by tools/setup-env.sh. The build
# (gcc, about a minute) makes a wheel in the cache, so --prepare does it
# before the project's venv exists (virtme-ng's venv has the same python3)
wheels=$cache/wheels
if ! compgen -G "$wheels/libvirt_python-9.0.0-*.whl" >/dev/null; then
    note "building a libvirt-python 9.0.0 wheel into $wheels"
    "$vng_venv/bin/pip" wheel -q --no-deps -w "$wheels" \
        libvirt-python==9.0.0 ||
        fail "could not build libvirt-python 9.0.0 (needs libvirt-dev, pkg-config, gcc)"
fi
if [ "$mode" != prepare ] &&
        ! "$venv/bin/python" -c 'import libvirt' 2>/dev/null; then
    note "installing libvirt-python 9.0.0 into $venv"
    # (built again if the venv's Python is not the wheel's)
    "$venv/bin/pip" install -q --no-index --find-links "$wheels" \
        libvirt-python==9.0.0 2>/dev/null ||
        "$venv/bin/pip" install -q libvirt-python==9.0.0 ||
        fail "could not build libvirt-python 9.0.0 (needs libvirt-dev, pkg-config, gcc)"
fi

# -- Open CAS for the guest kernel: the os_brick_cas role's build tasks --
tarball=${OS_BRICK_CAS_OPENCAS_TARBALL:-}
if [ -z "$tarball" ]; then
    # ../shared beside the repository: the checkout's parent, or for a
    # git worktree (any directory) the parent of its main working tree
    vendor=
    for repo in "$checkout" "$(dirname "$(git -C "$checkout" rev-parse \
            --path-format=absolute --git-common-dir 2>/dev/null || echo .)")"; do
        if [ -d "$repo/../shared/vendor/open-cas" ]; then
            vendor=$(realpath "$repo/../shared/vendor/open-cas")
            break
        fi
    done
    wanted=${OS_BRICK_CAS_OPENCAS_RELEASE:-v*}
    [ -n "$vendor" ] && tarball=$(find "$vendor" -maxdepth 1 \
        -name "open-cas-linux-$wanted.tar.xz" 2>/dev/null | sort -V | tail -n 1)
    [ -n "$tarball" ] || fail "no Open CAS tarball open-cas-linux-$wanted.tar.xz in ../shared/vendor/open-cas/ beside $checkout or its main working tree (set OS_BRICK_CAS_OPENCAS_TARBALL)"
fi
tarball=$(realpath "$tarball")
casroot=$(tools/kernel/build-opencas.sh "$tarball" "$kver" "$cache" | tail -n 1) ||
    fail "Open CAS $(basename "$tarball") does not build for kernel $kver"
[ -d "$casroot" ] || fail "Open CAS build of $tarball gave no staging root"
version=$(cat "$casroot/VERSION")
note "Open CAS $version for $kver: $casroot"
[ "$mode" = prepare ] && exit 0
if [ -n "${OS_BRICK_CAS_KERNEL_ANSIBLE_VENV:-}" ]; then
    # provision mode (tools/run-ansible-tests.sh): the os_brick_cas
    # role installs Open CAS in the guest from that staging root
    mode=provision
    set -- "$OS_BRICK_CAS_KERNEL_ANSIBLE_VENV" "$@"
fi

# -- guest ---------------------------------------------------------------
results=${OS_BRICK_CAS_KERNEL_RESULTS:-}
if [ -z "$results" ]; then
    mkdir -p "$cache/runs"
    results=$(mktemp -d "$cache/runs/$(date +%Y%m%d-%H%M%S)-XXXX")
fi
mkdir -p "$results" && results=$(realpath "$results")
rm -f "$results/rc" "$results/reason"
# the guest cannot write the checkout: compile the bytecode it imports
"$venv/bin/python" -m compileall -q os_brick_cas nova_ext tests tools/kernel \
    benchmarks >/dev/null 2>&1 || true

accel=(--disable-kvm)
if grep -qE '\b(vmx|svm)\b' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ] &&
        [ -w /dev/kvm ]; then
    accel=()
    note "hardware virtualisation: KVM"
else
    note "no hardware KVM here (no vmx/svm, or kvm_pvm): qemu TCG"
fi
timeout_s=${OS_BRICK_CAS_KERNEL_TIMEOUT:-1200}
# The guest sees the host's / read-only, but /var, /tmp and some others
# are fresh tmpfs there: share what it needs explicitly, at the same paths.
# libvirtd's probe of QEMU's capabilities (22-34 s in the guest) is kept
# here between runs; libvirt itself drops it when QEMU or libvirt change
libvirt_caps=$cache/libvirt-capabilities
mkdir -p "$libvirt_caps"
shares=(--rodir "$casroot" --rodir "$checkout" --rwdir "$libvirt_caps")
[ "$mode" = provision ] && shares+=(--rodir "$OS_BRICK_CAS_KERNEL_ANSIBLE_VENV")
case "$(realpath "$venv")/" in
    "$checkout"/*) ;;
    *) shares+=(--rodir "$(realpath "$venv")") ;;
esac
qemu_group=
cleanup() {
    if [ -n "$qemu_group" ] && kill -0 -- "-$qemu_group" 2>/dev/null; then
        echo "stopping the guest (process group $qemu_group)" >&2
        kill -TERM -- "-$qemu_group" 2>/dev/null
        sleep 2
        kill -KILL -- "-$qemu_group" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
note "booting $vmlinuz (memory ${OS_BRICK_CAS_KERNEL_MEMORY:-2G}, bound ${timeout_s}s); results in $results"
# the guest's command line (the kernel's, 2 KiB at most) carries the
# settings the guest reads: the role's plays and the reader-race sizes
forwarded=()
for name in OS_BRICK_CAS_ROLE_RUNS OS_BRICK_CAS_RACE_PASSES OS_BRICK_CAS_KERNEL_PROFILE \
        OS_BRICK_CAS_RACE_MIB OS_BRICK_CAS_RACE_WIDE_LINES; do
    [ -n "${!name:-}" ] && forwarded+=("$name=${!name}")
done
guest_cmd=$(printf '%q ' env "${forwarded[@]}" \
            OS_BRICK_CAS_KERNEL_LIBVIRT_CAPS="$libvirt_caps" \
            "$checkout/tools/kernel/guest.sh" "$results" \
            "$checkout" "$casroot" "$venv" "$mode" "$@")
# vng's qemu opens /proc/self/fd/1 and /2 as "file" chardevs, which
# truncates a regular file: through pipes, a log this run's output is
# appended to (CI's, run-tests.sh's) keeps what earlier suites wrote
PATH=$vng_venv/bin:$PATH setsid timeout --kill-after=20 "$timeout_s" \
    vng "${accel[@]}" --run "$vmlinuz" \
        --memory "${OS_BRICK_CAS_KERNEL_MEMORY:-2G}" --cpus 2 \
        "${shares[@]}" --rwdir "$results" --exec "$guest_cmd" < /dev/null \
        > >(cat) 2> >(cat >&2) &
qemu_group=$!
wait "$qemu_group"
vng_rc=$?
qemu_group_done=$qemu_group
cleanup
qemu_group=
# only what this run started: vng, qemu and their children are in the
# session setsid opened (its id is the group leader's pid)
if pgrep -s "$qemu_group_done" >/dev/null; then
    pgrep -a -s "$qemu_group_done" >&2
    fail "a process of the guest's session $qemu_group_done is still running after the run"
fi
[ "$vng_rc" -eq 124 ] && fail "the guest ran out of time (${timeout_s}s, OS_BRICK_CAS_KERNEL_TIMEOUT); its log: $results/guest.log"
if [ ! -f "$results/rc" ]; then
    fail "the guest did not run (vng exit status $vng_rc, process group $qemu_group_done): $(cat "$results/reason" 2>/dev/null || echo 'no result written; see the console output above')"
fi
[ -f "$results/reason" ] && fail "guest set-up: $(cat "$results/reason")"
rc=$(cat "$results/rc")
if { [ "$mode" = tests ] || [ "$mode" = provision ]; } &&
        [ -s "$results/kernel.subunit" ]; then
    # the guest wrote the stream; its verdict is taken here
    "$venv/bin/stestr" --repo-url "$results" init >/dev/null 2>&1
    "$venv/bin/stestr" --repo-url "$results" load < "$results/kernel.subunit"
    # stestr load's status does not tell failures: count them
    "$venv/bin/subunit-stats" < "$results/kernel.subunit" > "$results/stats.txt"
    stats_rc=$?
    cat "$results/stats.txt"
    grep -q '^Passed tests: *[1-9]' "$results/stats.txt" || stats_rc=1
    if [ $stats_rc -ne 0 ]; then
        "$venv/bin/stestr" --repo-url "$results" failing \
            > "$results/failing.txt" 2>&1
        rc=1
    fi
fi
if [ "${OS_BRICK_CAS_KERNEL_RECORD:-0}" = 1 ] && [ -d "$results/golden" ]; then
    line=$(basename "$tarball" .tar.xz | sed 's/^open-cas-linux-//')
    mkdir -p "tests/data/real-casadm/$line"
    cp "$results/golden/"*.txt "tests/data/real-casadm/$line/"
    note "golden casadm outputs copied to tests/data/real-casadm/$line/"
fi
note "guest run finished: exit status $rc (Open CAS $version, kernel $kver, results $results)"
exit "$rc"
