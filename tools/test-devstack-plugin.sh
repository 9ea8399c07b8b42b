#!/bin/bash
# each phase runs in a subshell with its own PATH, on purpose
# shellcheck disable=SC2030,SC2031
# Test harness of the devstack plugin: runs plugin.sh phases with devstack's
# functions stubbed (recording every call) and real ini files, then checks
# the commands issued and the configuration written. No root, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# minimal line-based ini editing, the way devstack's inifile functions
# behave (iniset replaces, iniadd appends values of a multi-valued option)
cat > "$WORK/ini.py" <<'PY'
import sys

action, path, section, option = sys.argv[1:5]
values = sys.argv[5:]
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    lines = []
out, in_section, seen_section, done = [], False, False, False
for line in lines:
    stripped = line.strip()
    if stripped.startswith('[') and stripped.endswith(']'):
        if in_section and not done:
            out += ['%s = %s' % (option, v) for v in values]
            done = True
        in_section = stripped[1:-1] == section
        seen_section = seen_section or in_section
    elif (in_section and action == 'set' and
          stripped.split('=', 1)[0].strip() == option):
        if not done:
            out += ['%s = %s' % (option, v) for v in values]
            done = True
        continue
    out.append(line)
if not done:
    if not seen_section:
        out.append('[%s]' % section)
    out += ['%s = %s' % (option, v) for v in values]
open(path, 'w').write('\n'.join(out) + '\n')
PY

cat > "$WORK/stubs.sh" <<'STUBS'
# shellcheck shell=bash
log() { echo "$*" >> "$CALLS"; }
echo_summary() { :; }
define_plugin() { log "define_plugin $*"; }
plugin_requires() { log "plugin_requires $*"; }
iniset() { log "iniset $*"; python3 "$WORK/ini.py" set "$@"; }
iniadd() { log "iniadd $*"; python3 "$WORK/ini.py" add "$@"; }
install_package() { log "install_package $*"; }
setup_develop() { log "setup_develop $*"; }
pip_install() { log "pip_install $*"; }
git_clone() {
    log "git_clone $*"
    mkdir -p "$2"
    printf '#!/bin/sh\nexit 0\n' > "$2/configure"
    chmod +x "$2/configure"
}
git() { log "git $*"; }
make() { log "make $*"; }
openstack() { log "openstack $*"; }
sudo() {
    log "sudo $*"
    case "$1" in
        tee|mkdir) "$@" ;;
        casadm)
            if [[ -n "${CASADM_FAIL:-}" && "$*" == *"$CASADM_FAIL"* ]]; then
                return 1
            fi ;;
        *) ;;
    esac
}
STUBS

# run_phase NAME ARGS... : one plugin.sh phase in a fresh bash
run_phase() {
    local name=$1; shift
    (
        export CALLS="$WORK/calls.$name" WORK OS_BRICK_CAS_DIR="$REPO"
        export DEST="$WORK/dest" NOVA_CONF="$WORK/nova.conf"
        export CINDER_CONF="$WORK/cinder.conf"
        export TEMPEST_CONFIG="$WORK/tempest.conf"
        export OPEN_CAS_CONF="$WORK/opencas/opencas.conf"
        export PATH="$PATHDIR:$PATH"
        # shellcheck disable=SC2016
        bash -c 'set -eu; source "$WORK/stubs.sh";
                 source "$OS_BRICK_CAS_DIR/devstack/settings";
                 source "$OS_BRICK_CAS_DIR/devstack/plugin.sh" "$@"' \
            phase "$@"
    )
}

# check DESCRIPTION COMMAND...: PASS if the command succeeds
check() {
    local description=$1; shift
    if "$@"; then pass "$description"; else fail "$description"; fi
}

calls() { cat "$WORK/calls.$1" 2>/dev/null || true; }
has() { calls "$1" | grep -qF -- "$2"; }
ini_has() { grep -qxF -- "$2" "$1"; }

# a PATH without casadm, and one with a casadm
mkdir -p "$WORK/nocas" "$WORK/withcas"
printf '#!/bin/sh\nexit 0\n' > "$WORK/withcas/casadm"
chmod +x "$WORK/withcas/casadm"
NOCAS_PATH=$(printf '%s' "$PATH" | tr ':' '\n' |
    while read -r dir; do [ -x "$dir/casadm" ] || printf '%s:' "$dir"; done)
export PATH="${NOCAS_PATH%:}"

# -- pre-install ----------------------------------------------------------
PATHDIR=$WORK/nocas run_phase build stack pre-install
if has build "git_clone https://github.com/Open-CAS/open-cas-linux" &&
        has build "make install"; then
    pass "pre-install builds Open CAS from the configured repo"
else fail "pre-install did not build Open CAS: $(calls build)"; fi
PATHDIR=$WORK/withcas run_phase prebuilt stack pre-install
if ! has prebuilt git_clone; then pass "pre-install skips the build when casadm exists"
else fail "pre-install rebuilt Open CAS although casadm exists"; fi

# -- install --------------------------------------------------------------
PATHDIR=$WORK/withcas run_phase install stack install
check "package installed with setup_develop" has install "setup_develop $REPO"
check "nova shim installed" has install "sudo os-brick-cas nova-shim install"
check "rootwrap filter installed" has install "/etc/nova/rootwrap.d/os-brick-cas.filters"

# -- post-config ----------------------------------------------------------
printf '[DEFAULT]\ncompute_driver = libvirt.LibvirtDriver\n' > "$WORK/nova.conf"
printf '[DEFAULT]\n[ceph]\nvolume_driver = cinder.volume.drivers.rbd.RBDDriver\n' \
    > "$WORK/cinder.conf"
PATHDIR=$WORK/withcas run_phase config stack post-config
for expected in \
    "sudo casadm --start-cache --cache-device /dev/ram0 --cache-id 1 --cache-mode wt --force" \
    "sudo casadm --start-cache --cache-device /dev/ram1 --cache-id 2 --cache-mode wb --force" \
    "sudo modprobe brd rd_nr=2 rd_size=1048576"; do
    check "post-config ran: $expected" has config "$expected"
done
if grep -qP '^2\t/dev/ram1\tWB$' "$WORK/opencas/opencas.conf" &&
        ! grep -qP '^1\t' "$WORK/opencas/opencas.conf"; then
    pass "opencas.conf lists the wb instance (only)"
else fail "opencas.conf: $(cat "$WORK/opencas/opencas.conf")"; fi
for line in "compute_driver = os_brick_cas_libvirt.CachedRBDLibvirtDriver" \
            "enabled = True" "cache_instances = wt:1,wb:2" \
            "resume_guests_state_on_host_boot = True"; do
    check "nova.conf: $line" ini_has "$WORK/nova.conf" "$line"
done
if [ "$(grep -c '^compute_driver' "$WORK/nova.conf")" = 1 ]; then
    pass "nova.conf has one compute_driver"
else fail "nova.conf compute_driver duplicated"; fi
# devstack copies nova.conf to nova-cpu.conf when it starts nova-compute
cp "$WORK/nova.conf" "$WORK/nova-cpu.conf"
check "settings survive devstack's nova.conf -> nova-cpu.conf copy" \
    ini_has "$WORK/nova-cpu.conf" \
    "compute_driver = os_brick_cas_libvirt.CachedRBDLibvirtDriver"
check "cinder.conf: ceph backend uses CachedRBDDriver" \
    ini_has "$WORK/cinder.conf" "volume_driver = cinder_ext.rbd.CachedRBDDriver"
if [ "$(grep -c '^osapi_volume_extension' "$WORK/cinder.conf")" = 3 ] &&
        ini_has "$WORK/cinder.conf" \
            "osapi_volume_extension = cinder_ext.api.type_validation.TypeValidation"; then
    pass "cinder.conf: standard + fence + type validation extensions"
else fail "cinder.conf extensions: $(grep osapi "$WORK/cinder.conf")"; fi

# own cache devices: no RAM disks
OPEN_CAS_CACHE_DEVICES="/dev/disk/by-id/nvme-x-part1 /dev/disk/by-id/nvme-x-part2" \
    PATHDIR=$WORK/withcas run_phase devices stack post-config
if has devices "--cache-device /dev/disk/by-id/nvme-x-part2 --cache-id 2 --cache-mode wb" &&
        ! has devices "modprobe brd"; then
    pass "configured cache devices are used, no RAM disk"
else fail "configured devices ignored: $(calls devices)"; fi

# -- extra / test-config -------------------------------------------------
PATHDIR=$WORK/withcas run_phase extra stack extra
for mode in wt wb; do
    check "volume type cas-$mode created with its extra specs" has extra "openstack volume type create cas-$mode --property cacheable=<is> True --property cas:cache_mode=$mode --property volume_backend_name=ceph"
done
: > "$WORK/tempest.conf"
PATHDIR=$WORK/withcas run_phase tempest stack test-config
for line in "enabled = True" "offered_modes = wt,wb" \
            "volume_types = wt:cas-wt,wb:cas-wb"; do
    check "tempest.conf: $line" ini_has "$WORK/tempest.conf" "$line"
done

# -- unstack ---------------------------------------------------------------
PATHDIR=$WORK/withcas run_phase unstack unstack
order=$(calls unstack | grep -n 'casadm' | tr '\n' ' ')
if has unstack "sudo casadm --flush-cache --cache-id 2" &&
        has unstack "sudo casadm --stop-cache --cache-id 1" &&
        has unstack "sudo casadm --stop-cache --cache-id 2" &&
        [ "$(calls unstack | grep -n 'flush-cache --cache-id 2' | cut -d: -f1)" -lt \
          "$(calls unstack | grep -n 'stop-cache --cache-id 2' | cut -d: -f1)" ]; then
    pass "unstack flushes the wb instance, then stops both"
else fail "unstack order: $order"; fi
if calls unstack | grep -qE -- '--no-data-flush|-n( |$)|--remove-core.*(-f|--force)'; then
    fail "unstack used a data-dropping option"
else pass "unstack never drops dirty data (no --no-data-flush, no -R -f)"; fi
if CASADM_FAIL="--flush-cache --cache-id 2" PATHDIR=$WORK/withcas \
        run_phase unstackfail unstack; then
    fail "unstack succeeded although the wb flush failed"
else
    if has unstackfail "sudo casadm --stop-cache --cache-id 1" &&
            ! has unstackfail "sudo casadm --stop-cache --cache-id 2"; then
        pass "failed flush: wb instance left running, unstack fails"
    else fail "failed flush handling: $(calls unstackfail)"; fi
fi

# -- clean -------------------------------------------------------------------
PATHDIR=$WORK/withcas run_phase clean clean
check "clean removes the nova shim" has clean "sudo os-brick-cas nova-shim remove"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all devstack plugin checks passed"
