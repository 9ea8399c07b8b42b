#!/bin/bash
# Test harness of the devstack plugin (devstack/).
#
# Runs each plugin.sh phase in a child bash with devstack's functions
# stubbed and every system command (sudo, modprobe, losetup, truncate,
# udevadm, parted, make, git, openstack, os-brick-cas, virsh) replaced by a
# stub that records the call; ini files are real files written by a small
# iniset/iniadd stand-in. Then checks the commands issued and the
# configuration written, one PASS/FAIL line per check.
#
# The plugin never runs casadm itself: the cache instances are started,
# stopped and forgotten by "os-brick-cas host apply|stop|forget", whose
# stub here keeps the stub host's instances and writes opencas.conf with
# the product's own code. What those verbs do against casadm is tested on
# the simulated host (tests/functional/test_host_layout.py,
# test_host_teardown.py). "casadm" is only a recorded name (the plugin
# checks that Open CAS is installed with "command -v casadm"); every
# scenario checks it was never called.
#
# No network, no root, nothing outside a temporary directory. The stubs are
# this script's stub_* functions, written to one small script that is
# reached through symlinks named after the commands.
#
#   tools/test-devstack-plugin.sh          # exit status 1 on any FAIL
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(cd "$(dirname "$SELF")/.." && pwd)
STUB_COMMANDS="sudo casadm modprobe rmmod losetup truncate udevadm parted
make git openstack os-brick-cas virsh"


# Shared helpers
# --------------

# An argument as it appears in the call log: quoted if it has odd characters.
_q() {
    if [[ "$1" =~ ^[][A-Za-z0-9_./:=,+@%^-]+$ ]]; then
        printf '%s' "$1"
    else
        printf "'%s'" "$1"
    fi
}

record() {
    local line="" arg
    for arg in "$@"; do
        line+="${line:+ }$(_q "$arg")"
    done
    printf '%s\n' "$line" >> "$CALLS"
}

# Line-based ini editing with devstack's semantics (iniset replaces an
# option, iniadd appends values of a multi-valued option, iniget prints the
# first value, iniget_multiline all of them).
ini() {
    "${PYTHON:-python3}" -I - "$@" <<'PY'
import configparser
import sys

op, path = sys.argv[1], sys.argv[2]
try:
    with open(path) as f:
        lines = f.read().splitlines()
except FileNotFoundError:
    lines = []


def header(line):
    s = line.strip()
    return s[1:-1].strip() if s.startswith('[') and s.endswith(']') else None


def key(line):
    s = line.strip()
    if not s or s[0] in '#;' or '=' not in s:
        return None
    return s.split('=', 1)[0].strip()


if op == 'check':
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_file(open(path))
    sys.exit(0)

section, option, values = sys.argv[3], sys.argv[4], sys.argv[5:]
start, end = None, len(lines)
for i, line in enumerate(lines):
    if header(line) is not None:
        if start is not None:
            end = i
            break
        if header(line) == section:
            start = i

if op in ('get', 'getm'):
    found = [] if start is None else [
        l.split('=', 1)[1].strip() for l in lines[start + 1:end]
        if key(l) == option]
    print(found[0] if op == 'get' and found else ' '.join(found))
    sys.exit(0)
if start is None:
    lines += ([''] if lines else []) + ['[%s]' % section]
    start, end = len(lines) - 1, len(lines)
body = lines[start + 1:end]
if op == 'set':
    body = [l for l in body if key(l) != option]
if op in ('set', 'add'):
    k = len(body)
    while k and not body[k - 1].strip():
        k -= 1
    body[k:k] = ['%s = %s' % (option, v) for v in values]
lines = lines[:start + 1] + body + lines[end:]
with open(path, 'w') as f:
    f.write('\n'.join(lines) + '\n')
PY
}


# Stubs of system commands (this script run as "casadm", "sudo", ...)
# ---------------------------------------------------------------------

# True if every absolute path among the arguments lies in $WORK (or, for
# files only read, in the repository).
_inside() {
    local mode=$1 arg
    shift
    for arg in "$@"; do
        [[ "$arg" == /* ]] || continue
        [[ "$arg" == "$WORK"/* ]] && continue
        [[ "$mode" == read && "$arg" == "$REPO"/* ]] && continue
        return 1
    done
}

stub_sudo() {
    while [[ "${1:-}" == -* ]]; do shift; done
    local cmd=$1
    if [[ -x "$STUB_BIN/$cmd" ]]; then
        exec "$STUB_BIN/$cmd" "${@:2}"
    fi
    # a stubbed command given by its path (e.g. nova's venv/bin/os-brick-cas)
    if [[ "$cmd" == */* && -x "$STUB_BIN/${cmd##*/}" ]]; then
        exec "$STUB_BIN/${cmd##*/}" "${@:2}"
    fi
    local last=${!#} ok=0
    case "$cmd" in
        test|cat) _inside read "${@:2}" && ok=1 ;;
        rm|mkdir|touch|tee|chmod) _inside write "${@:2}" && ok=1 ;;
        ln) _inside write "$last" && ok=1 ;;
        install|cp|mv)
            _inside read "${@:2}" && _inside write "$last" && ok=1 ;;
    esac
    if [[ $ok == 1 ]]; then
        "$@"
    else
        record UNSAFE "$@"
        echo "stub sudo: refusing to run '$*' outside $WORK" >&2
        return 99
    fi
}

_stub_arg() {  # value following option $1 (or $2) in the rest
    local short=$1 long=$2
    shift 2
    while [[ $# -gt 0 ]]; do
        if [[ "$1" == "$short" || "$1" == "$long" ]]; then
            echo "${2:-}"
            return 0
        fi
        shift
    done
}

# Guests: $STUB_STATE/domains, one "name state disk..." line each (state
# running or shut-off); STUB_GUEST_IGNORES_SHUTDOWN names guests that ignore
# ACPI shutdown.
_virsh_running_with() {  # a running guest has a disk starting with $1
    [[ -f "$STUB_STATE/domains" ]] &&
        awk -v p="$1" '$2 == "running" {
            for (i = 3; i <= NF; i++) if (index($i, p) == 1) found = 1 }
            END { exit !found }' "$STUB_STATE/domains"
}

_virsh_set_state() {
    awk -v d="$1" -v s="$2" '$1 == d { $2 = s } { print }' \
        "$STUB_STATE/domains" > "$STUB_STATE/domains.new"
    mv "$STUB_STATE/domains.new" "$STUB_STATE/domains"
}

stub_virsh() {
    touch "$STUB_STATE/domains"
    case "$1" in
        list) awk '$2 == "running" { print $1 }' "$STUB_STATE/domains" ;;
        domblklist)
            printf ' Type   Device   Target   Source\n'
            awk -v d="${!#}" '$1 == d { for (i = 3; i <= NF; i++)
                printf " block  disk     vd%c      %s\n", 97 + i, $i }' \
                "$STUB_STATE/domains" ;;
        domstate)
            awk -v d="$2" '$1 == d { sub("-", " ", $2); print $2 }' \
                "$STUB_STATE/domains" ;;
        shutdown)
            [[ " ${STUB_GUEST_IGNORES_SHUTDOWN:-} " == *" $2 "* ]] ||
                _virsh_set_state "$2" shut-off ;;
        destroy) _virsh_set_state "$2" shut-off ;;
    esac
}

stub_modprobe() {
    mkdir -p "$STUB_STATE/sys/module/$1"
}

stub_rmmod() {
    rmdir "$STUB_STATE/sys/module/$1"
}

stub_losetup() {
    local loops=$STUB_STATE/loops file
    touch "$loops"
    case "$1" in
        -j)
            awk -v f="$2" '$1 == f { print $2 ": [2049]:42 (" f ")" }' "$loops" ;;
        -d)
            awk -v d="$2" '$2 != d' "$loops" > "$loops.new"
            mv "$loops.new" "$loops" ;;
        *)
            file=${!#}
            _inside write "$file" || return 99
            echo "$file /dev/loop$(wc -l < "$loops")" >> "$loops"
            echo "/dev/loop$(($(wc -l < "$loops") - 1))" ;;
    esac
}

stub_truncate() {
    _inside write "${!#}" || return 99
    touch "${!#}"
}

stub_parted() {
    local device arg
    for arg in "$@"; do
        if [[ "$arg" == /* ]]; then device=$arg; break; fi
    done
    if [[ "$*" == *" mkpart "* ]]; then
        local n=1
        while [[ -e "$device-part$n" ]]; do n=$((n + 1)); done
        touch "$device-part$n"
    fi
}

stub_make() {
    if [[ "${1:-}" == install ]]; then
        # as Open CAS's make install: casadm, and its template opencas.conf
        ln -sf "$WORK/stub" "$STUB_BIN/casadm"
        mkdir -p "$(dirname "$OPEN_CAS_CONF")"
        printf 'version=19.3.0\n[caches]\n[cores]\n' > "$OPEN_CAS_CONF"
    fi
}

# The stub host's running cache instances: $STUB_STATE/caches, one
# "cache,<id>,<device>,Running,<mode>,-" line each (casadm -L's CSV rows).
# Mode of running instance $1 (empty if it does not run).
_stub_running_mode() {
    [[ -f "$STUB_STATE/caches" ]] || return 0
    local type id device mode rest
    while IFS=, read -r type id device _ mode rest; do
        [[ "$type" == cache && "$id" == "$1" ]] && echo "$mode"
    done < "$STUB_STATE/caches"
    return 0
}

# "<id> <mode> <device>" of every instance of the layout in the CLI's
# --config-file (args "$@"), read with the product's own parser.
_stub_host_layout() {
    local conf layout
    conf=$(_stub_arg --config-file --config-file "$@")
    layout=$(sed -n 's/^host_layout = //p' "$conf")
    PYTHONPATH=$REPO "$PYTHON" - "$layout" <<'PY'
import sys
from tests import devstack_layout
for item in devstack_layout.load(sys.argv[1]).instances:
    print(item.cache_id, item.mode.value, item.device)
PY
}

# Drops the opencas.conf rows of cache ids $2... with the product's code
# (the conf file of the CLI's --config-file $1).
_stub_forget_rows() {
    local opencas
    opencas=$(sed -n 's/^opencas_conf = //p' "$1")
    shift
    PYTHONPATH=$REPO "$PYTHON" - "$opencas" "$@" <<'PY'
import sys
from os_brick_cas.opencas import opencas_conf
opencas_conf.forget_caches_file(sys.argv[1], [int(i) for i in sys.argv[2:]])
PY
}

_stub_kept() {  # id mode why: the CLI's REFUSED line and value row
    echo "REFUSED cache instance $1 ($2): kept: $3" >&2
    echo "$1 kept"
}

# "os-brick-cas host ..." as the stub host sees it. The layout the plugin
# wrote is read with the product's own parser; opencas.conf rows are
# written and dropped by the product's own code.
# - apply: instances are refused (nothing changed) over Open CAS metadata
#   (STUB_CHECK_DEVICE, unless --load-existing) or in another mode, else
#   started in the stub's state.
# - stop: each running instance is stopped, unless it is wb/wo and its id
#   is in STUB_FAIL_FLUSH, or in STUB_FAIL_STOP, or a running guest holds
#   one of its /dev/casX-Y: then kept (exit 2). Prints "<id> <result>" as
#   "-f value -c cache_id -c result" does.
# - forget: each instance not running whose device holds no dirty
#   metadata (STUB_CHECK_DEVICE) is forgotten, the others kept (exit 2).
stub_os-brick-cas() {
    if [[ " $* " == *" host install-files "* ]]; then
        # what the real verb does for these two kinds: the filter as
        # shipped, the rule's PROGRAM at this environment's Python running
        # the namer module without site (installed_files.namer_program)
        local rootwrap udev
        rootwrap=$(_stub_arg --rootwrap-dir --rootwrap-dir "$@")
        udev=$(_stub_arg --udev-rules-dir --udev-rules-dir "$@")
        mkdir -p "$rootwrap" "$udev"
        cp "$REPO/etc/rootwrap.d/os-brick-cas.filters" "$rootwrap/"
        sed "s|PROGRAM=\"[^ \"]*os-brick-cas-rbd-namer|PROGRAM=\"$(dirname "$0")/python3 -I -S $REPO/os_brick_cas/rbd_names.py|" \
            "$REPO/etc/udev/rules.d/60-os-brick-cas-rbd.rules" \
            > "$udev/60-os-brick-cas-rbd.rules"
        return 0
    fi
    local verb conf lines id mode device running rc=0 load=0 done_ids=()
    case " $* " in
        *" host apply"*) verb=apply ;;
        *" host stop"*) verb=stop ;;
        *" host forget"*) verb=forget ;;
        *) return 0 ;;
    esac
    conf=$(_stub_arg --config-file --config-file "$@")
    lines=$(_stub_host_layout "$@") || return 2
    touch "$STUB_STATE/caches"
    if [[ ! -d "$STUB_STATE/sys/module/cas_cache" ]]; then
        case $verb in
            apply) echo "the Open CAS kernel module is not loaded" >&2
                   return 2 ;;
            # no instance can run; metadata cannot be read
            stop) while read -r id mode device; do
                      echo "$id not-running"
                  done <<< "$lines"
                  return 0 ;;
        esac
    fi
    if [[ $verb == stop ]]; then
        while read -r id mode device; do
            running=$(_stub_running_mode "$id")
            if [[ -z "$running" ]]; then
                echo "$id not-running"
            elif [[ "$running" =~ ^w[bo]$ &&
                    " ${STUB_FAIL_FLUSH:-} " == *" $id "* ]]; then
                _stub_kept "$id" "$running" "flushing it failed. It is" \
                    "left running with its dirty data"
                rc=2
            elif [[ " ${STUB_FAIL_STOP:-} " == *" $id "* ]] ||
                    _virsh_running_with "/dev/cas$id-"; then
                _stub_kept "$id" "$running" "stopping it failed"
                rc=2
            else
                sed -i "/^cache,$id,/d" "$STUB_STATE/caches"
                done_ids+=("$id")
                echo "$id stopped"
            fi
        done <<< "$lines"
        [[ ${#done_ids[@]} == 0 ]] || _stub_forget_rows "$conf" "${done_ids[@]}"
        return $rc
    fi
    if [[ $verb == forget ]]; then
        while read -r id mode device; do
            if [[ -n "$(_stub_running_mode "$id")" ]]; then
                _stub_kept "$id" "$mode" "it still runs"
                rc=2
            elif [[ ! -d "$STUB_STATE/sys/module/cas_cache" ]]; then
                _stub_kept "$id" "$mode" "$device could not be checked"
                rc=2
            elif [[ "${STUB_CHECK_DEVICE:-}" == "$device=yes,"* &&
                    "${STUB_CHECK_DEVICE:-}" != "$device=yes,yes,no" ]]; then
                _stub_kept "$id" "$mode" "$device holds Open CAS metadata" \
                    "with dirty data"
                rc=2
            else
                done_ids+=("$id")
                echo "$id forgotten"
            fi
        done <<< "$lines"
        [[ ${#done_ids[@]} == 0 ]] || _stub_forget_rows "$conf" "${done_ids[@]}"
        return $rc
    fi
    [[ " $* " == *" --load-existing "* ]] && load=1
    while read -r id mode device; do
        running=$(_stub_running_mode "$id")
        if [[ -n "$running" && "$running" != "$mode" ]]; then
            echo "REFUSED instance $id: it runs in mode $running, the" \
                 "layout wants $mode" >&2
            return 2
        fi
        if [[ -z "$running" && $load == 0 &&
                "${STUB_CHECK_DEVICE:-}" == "$device=yes,"* ]]; then
            echo "REFUSED instance $id: $device holds Open CAS metadata;" \
                 "Load it with 'casadm -S -d $device -l'" >&2
            return 2
        fi
    done <<< "$lines"
    while read -r id mode device; do
        grep -q "^cache,$id," "$STUB_STATE/caches" ||
            echo "cache,$id,$device,Running,$mode,-" >> "$STUB_STATE/caches"
    done <<< "$lines"
    PYTHONPATH=$REPO "$PYTHON" - "$(sed -n 's/^host_layout = //p' "$conf")" \
        "$(sed -n 's/^opencas_conf = //p' "$conf")" <<'PY'
import sys
from os_brick_cas.host import prep
from os_brick_cas.opencas import opencas_conf
from tests import devstack_layout
rows = prep.cache_rows(devstack_layout.load(sys.argv[1]))
opencas_conf.update_caches_file(sys.argv[2], rows)
PY
}

stub_openstack() {
    local args=" $* " name=${!#}
    if [[ "$args" == *" volume type show "* ]]; then
        [[ " ${STUB_EXISTING_TYPES:-} " == *" $name "* ]]
    fi
}

run_stub() {
    local name=$1
    shift
    record "$name" "$@"
    # commands without a stub_<name> (udevadm, git, ...) only get recorded
    if declare -F "stub_$name" >/dev/null; then
        "stub_$name" "$@"
    fi
}


# The child: one plugin.sh phase with devstack stubbed
# ----------------------------------------------------

devstack_stubs() {
    iniset() {
        [[ "$1" == -sudo ]] && shift
        record iniset "$@"
        ini set "$@"
    }
    iniadd() {
        [[ "$1" == -sudo ]] && shift
        record iniadd "$@"
        ini add "$@"
    }
    iniget() { ini get "$@"; }
    iniget_multiline() { ini getm "$@"; }
    install_package() { record install_package "$@"; }
    setup_develop() { record setup_develop "$@"; }
    git_clone() {
        record git_clone "$@"
        mkdir -p "$2"
        printf '#!/bin/sh\necho configure >> "%s"\n' "$CALLS" > "$2/configure"
        chmod +x "$2/configure"
    }
    is_service_enabled() {
        local service
        for service in "$@"; do
            [[ ",$ENABLED_SERVICES," == *",$service,"* ]] && return 0
        done
        return 1
    }
    is_ubuntu() { return 0; }
    is_fedora() { return 1; }
    die() {
        shift
        record die "$*"
        echo "[ERROR] $*" >&2
        exit 1
    }
    warn() {  # as devstack's: prints its second argument only
        record warn "$2"
        echo "[WARNING] $2"
    }
    echo_summary() { echo "$*"; }
    define_plugin() { record define_plugin "$@"; }
    plugin_requires() { record plugin_requires "$@"; }
    async_wait() { record async_wait "$@"; }
}

child() {
    local scenario=$1
    shift
    # shellcheck source=/dev/null
    source "$scenario/env.sh"
    devstack_stubs
    export PATH="$STUB_BIN:$PATH"
    # as devstack: stack.sh runs with errexit, unstack.sh and clean.sh
    # without; none of them with pipefail
    set +o pipefail
    if [[ "$1" != stack ]]; then
        set +o errexit
    fi
    if [[ "$1" == __settings ]]; then
        # shellcheck source=devstack/settings
        source "$REPO/devstack/settings"
        local var
        for var in "${@:2}"; do
            echo "$var=${!var}"
        done
        return 0
    fi
    # shellcheck source=devstack/settings
    source "$REPO/devstack/settings"
    # shellcheck source=devstack/plugin.sh
    source "$REPO/devstack/plugin.sh" "$@"
}


# The parent: scenarios and checks
# --------------------------------

PASSES=0
FAILURES=0

pass() { echo "PASS: $*"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }

check() {
    local description=$1
    shift
    if "$@"; then pass "$description"; else fail "$description"; fi
}

# new_scenario NAME [VAR=value ...]: a fresh host and devstack tree
new_scenario() {
    local name=$1 s=$WORK/$1 cmd
    shift
    mkdir -p "$s"/{bin,stub/sys/module,etc/nova,etc/cinder,etc/udev/rules.d} \
        "$s"/{tempest,dev/disk/by-id,data,dest,tmp}
    for cmd in $STUB_COMMANDS; do
        ln -s "$WORK/stub" "$s/bin/$cmd"
    done
    # devstack wrote these before any plugin's post-config
    printf '[DEFAULT]\ncompute_driver = libvirt.LibvirtDriver\n' \
        > "$s/etc/nova/nova.conf"
    # a stale nova-cpu.conf (from an earlier run): replaced by the copy
    printf '[os_brick_cas_nova]\nenabled = False\n' > "$s/etc/nova/nova-cpu.conf"
    cat > "$s/etc/cinder/cinder.conf" <<EOF
[DEFAULT]
enabled_backends = ceph
osapi_volume_extension = cinder.api.contrib.standard_extensions

[ceph]
volume_backend_name = ceph
volume_driver = cinder.volume.drivers.rbd.RBDDriver
rbd_pool = volumes
EOF
    printf '[auth]\nuse_dynamic_credentials = True\n' > "$s/tempest/tempest.conf"
    cat > "$s/env.sh" <<EOF
export WORK='$WORK' REPO='$REPO' SELF='$SELF' PYTHON='$PYTHON'
export CALLS='$s/calls.log' STUB_STATE='$s/stub' STUB_BIN='$s/bin'
export TMPDIR='$s/tmp'
export DEST='$s/dest' DATA_DIR='$s/data'
export NOVA_CONF_DIR='$s/etc/nova' NOVA_CONF='$s/etc/nova/nova.conf'
export NOVA_CPU_CONF='$s/etc/nova/nova-cpu.conf' NOVA_BIN_DIR='$s/venv/bin'
export CINDER_CONF='$s/etc/cinder/cinder.conf'
export TEMPEST_CONFIG='$s/tempest/tempest.conf'
export OPEN_CAS_CONF='$s/etc/opencas/opencas.conf'
export OPEN_CAS_BUILD_MANIFEST='$s/usr/lib/opencas/os-brick-cas-build.json'
export OS_BRICK_CAS_HOST_LAYOUT='$s/etc/os-brick-cas/host-layout.yaml'
export OPEN_CAS_BY_ID_DIR='$s/dev/disk/by-id'
export OS_BRICK_CAS_UDEV_RULES_DIR='$s/etc/udev/rules.d'
export _OS_BRICK_CAS_SYS_DIR='$s/stub/sys'
export OS_BRICK_CAS_STATE_PATH='$s/var/lib/os-brick-cas'
export STACK_USER=$(id -un)
export ENABLED_SERVICES=n-cpu,c-api,c-vol,c-sch,tempest
export VIRT_DRIVER=libvirt REGION_NAME=RegionOne TEMPEST_PLUGINS=0
export DEVSTACK_PLUGINS=os-brick-cas,devstack-plugin-ceph
EOF
    local assignment
    for assignment in "$@"; do
        printf 'export %q\n' "$assignment" >> "$s/env.sh"
    done
    # the parent only needs the paths (not exported: children get env.sh)
    S=$s
    CALLS=$s/calls.log STUB_STATE=$s/stub
    NOVA_CONF=$s/etc/nova/nova.conf NOVA_CPU_CONF=$s/etc/nova/nova-cpu.conf
    CINDER_CONF=$s/etc/cinder/cinder.conf
    TEMPEST_CONFIG=$s/tempest/tempest.conf
    OPEN_CAS_CONF=$s/etc/opencas/opencas.conf
    OS_BRICK_CAS_HOST_LAYOUT=$s/etc/os-brick-cas/host-layout.yaml
    OPEN_CAS_BY_ID_DIR=$s/dev/disk/by-id
    OS_BRICK_CAS_STATE_PATH=$s/var/lib/os-brick-cas
    STACK_USER=$(id -un)
}

# phase ARGS...: run one plugin.sh phase of the current scenario; its
# status in RC, its output in OUT/ERR (and appended to the scenario logs)
phase() {
    RC=0
    # a clean environment: only what the scenario's env.sh sets
    env -i PATH="$HOST_PATH" HOME="$S" LANG=C.UTF-8 \
        bash "$SELF" __child "$S" "$@" > "$S/phase.out" 2> "$S/phase.err" ||
        RC=$?
    OUT=$(cat "$S/phase.out")
    ERR=$(cat "$S/phase.err")
    cat "$S/phase.out" >> "$S/out.log"
    cat "$S/phase.err" >> "$S/err.log"
    echo "--- end of phase $* (rc $RC)" >> "$CALLS"
}

# set_stub_env VAR=value: change a stub knob for the next phases
set_stub_env() {
    printf 'export %q\n' "$1" >> "$S/env.sh"
}

called() { grep -qF -- "$1" "$CALLS"; }
not_called() { ! grep -qF -- "$1" "$CALLS"; }
called_regex() { grep -qE -- "$1" "$CALLS"; }
# first line matching $1 comes before the first matching $2
called_before() {
    local a b
    a=$(grep -nF -- "$1" "$CALLS" | head -n 1 | cut -d: -f1)
    b=$(grep -nF -- "$2" "$CALLS" | head -n 1 | cut -d: -f1)
    [[ -n "$a" && -n "$b" && "$a" -lt "$b" ]]
}
rc_is() { [[ "$RC" == "$1" ]]; }
rc_not_zero() { [[ "$RC" != 0 ]]; }
ini_is() { [[ "$(ini get "$1" "$2" "$3")" == "$4" ]]; }
ini_all_is() { [[ "$(ini getm "$1" "$2" "$3")" == "$4" ]]; }
ini_parses() { ini check "$1"; }
file_has_line() { grep -qxF -- "$2" "$1"; }
file_lacks() { [[ -f "$1" ]] && ! grep -qF -- "$2" "$1"; }
output_has() { [[ "$OUT$ERR" == *"$1"* ]]; }
opencas_row() { printf '%s\t%s\t%s' "$@"; }
# opencas.conf has a line starting with $1
opencas_has() {
    awk -v p="$1" 'index($0, p) == 1 { found = 1 } END { exit !found }' \
        "$OPEN_CAS_CONF"
}
opencas_rows_of() {  # number of rows of cache id $1 is $2
    [[ "$(awk -v id="$1" '$1 == id' "$OPEN_CAS_CONF" | wc -l)" == "$2" ]]
}
opencas_well_formed() {
    [[ "$(head -n 1 "$OPEN_CAS_CONF")" == version=* ]] &&
        grep -qxF "[caches]" "$OPEN_CAS_CONF" &&
        grep -qxF "[cores]" "$OPEN_CAS_CONF"
}
calls_count() { [[ "$(grep -cF -- "$1" "$CALLS")" == "$2" ]]; }
lines_count() { [[ "$(grep -c -- "$2" "$1")" == "$3" ]]; }
all_called() {
    local pattern
    for pattern in "$@"; do called "$pattern" || return 1; done
}
no_cache_running() { [[ ! -s "$STUB_STATE/caches" ]]; }
link_to() { [[ "$(readlink "$1")" == "$2" ]]; }
cache_running() { grep -q "^cache,$1,.*,Running,$2,-$" "$STUB_STATE/caches"; }
cache_not_running() { ! grep -q "^cache,$1," "$STUB_STATE/caches"; }
# the host layout the plugin wrote has instance $1 in mode $2 on $3 [lazy]
layout_has() {
    local line="  - {id: $1, mode: $2, device: $3"
    [[ "${4:-}" == lazy ]] && line+=", lazy_startup: true"
    grep -qxF -- "$line}" "$OS_BRICK_CAS_HOST_LAYOUT"
}
# a [caches] row as host apply writes it: id device MODE promotion [lazy]
apply_row() {
    printf '%s\t%s\t%s\tcache_line_size=4,cleaning_policy=alru,promotion_policy=%s%s' \
        "$1" "$2" "$3" "$4" "${5:+,lazy_startup=true}"
}
host_apply_called() {
    called "os-brick-cas --config-file $S/data/os-brick-cas/host-cli.conf host apply"
}

host_stop_called() {
    called "os-brick-cas --config-file $S/data/os-brick-cas/host-cli.conf host stop --with-cores --flush-timeout 1800 -f value -c cache_id -c result"
}
host_forget_called() {
    called "os-brick-cas --config-file $S/data/os-brick-cas/host-cli.conf host forget -f value -c cache_id -c result"
}

# Data-safety checks that hold for every scenario
safety_checks() {
    local name=$1
    check "$name: never runs casadm itself (host apply/stop/forget do)" \
        not_called_regex "(^| )casadm "
    check "$name: no --force, no --no-data-flush anywhere" \
        not_called_regex "(--force|--no-data-flush)( |$)"
    check "$name: no privileged command outside the sandbox" \
        not_called UNSAFE
}
not_called_regex() { ! grep -qE -- "$1" "$CALLS"; }

RBD_LINK=/dev/disk/by-id/rbd-volumes-volume-0d6c3a4e
add_core_rows() {
    sed -i -e "s|^\[caches\]$|&\n9\t/dev/disk/by-id/nvme-OPERATOR\tWB|" \
        -e "s|^\[cores\]$|&\n2\t1\t$RBD_LINK\tlazy_startup=true\n9\t1\t/dev/disk/by-id/rbd-x\tlazy_startup=true|" \
        "$OPEN_CAS_CONF"
}

stack_until_post_config() {
    phase stack pre-install
    phase stack install
    phase stack post-config
}

# Scenarios
# ---------

test_settings() {
    new_scenario settings
    phase __settings OS_BRICK_CAS_DIR OPEN_CAS_BRANCH OPEN_CAS_MODES \
        OPEN_CAS_CACHE_BACKEND OPEN_CAS_CACHE_SIZE TEMPEST_PLUGINS \
        OS_BRICK_CAS_CINDER_BACKEND OS_BRICK_CAS_ROOTWRAP_DIR
    check "settings: OS_BRICK_CAS_DIR defaults to this checkout" \
        output_has "OS_BRICK_CAS_DIR=$REPO"
    check "settings: Open CAS from a release tag without a known wb defect" \
        output_has "OPEN_CAS_BRANCH=v25.12.2"
    check "settings: modes wt wb on RAM disks of 1G by default" \
        output_has $'OPEN_CAS_MODES=wt wb\nOPEN_CAS_CACHE_BACKEND=ramdisk\nOPEN_CAS_CACHE_SIZE=1G'
    check "settings: the tempest plugin is added to TEMPEST_PLUGINS" \
        output_has "TEMPEST_PLUGINS=$REPO"
    check "settings: cinder backend section defaults to ceph" \
        output_has "OS_BRICK_CAS_CINDER_BACKEND=ceph"
    check "settings: rootwrap filter goes to nova's rootwrap.d" \
        output_has "OS_BRICK_CAS_ROOTWRAP_DIR=$S/etc/nova/rootwrap.d"
    check "settings: define_plugin os-brick-cas" called "define_plugin os-brick-cas"
    check "settings: plugin_requires devstack-plugin-ceph" \
        called "plugin_requires os-brick-cas devstack-plugin-ceph"
    new_scenario settings-override OPEN_CAS_CACHE_SIZE_MB=256 \
        "OPEN_CAS_CACHE_DEVICES=/x-part1 /x-part2"
    phase __settings OPEN_CAS_CACHE_SIZE OPEN_CAS_CACHE_BACKEND
    check "settings: OPEN_CAS_CACHE_SIZE_MB (older name) honoured" \
        output_has "OPEN_CAS_CACHE_SIZE=256M"
    check "settings: a device list selects the device backend" \
        output_has "OPEN_CAS_CACHE_BACKEND=device"
}

test_all_in_one() {
    local rules=60-os-brick-cas-rbd.rules
    new_scenario aio
    # casadm installed already
    phase stack pre-install
    check "aio pre-install: succeeds" rc_is 0
    check "aio pre-install: no build dependencies when casadm exists" \
        not_called "install_package"
    check "aio pre-install: no plugin-order warning (os-brick-cas first)" \
        not_called_regex "^warn "

    phase stack install
    check "aio install: succeeds" rc_is 0
    check "aio install: package installed into nova's/cinder's env" \
        called "setup_develop $REPO"
    check "aio install: Open CAS build skipped when casadm is present" \
        not_called "git_clone"
    check "aio install: no make when casadm is present" \
        not_called_regex "^(sudo )?make "
    check "aio install: checks nova loads the driver" \
        called "os-brick-cas nova-shim check"
    check "aio install: writes nothing into nova's tree" \
        not_called "nova-shim install"

    phase stack post-config
    check "aio post-config: succeeds" rc_is 0
    check "aio post-config: RAM disks, one per mode, 1 GiB each" \
        called "sudo modprobe brd rd_nr=2 rd_size=1048576"
    check "aio post-config: cas_cache module loaded" called "modprobe cas_cache"
    check "aio post-config: host layout has wt instance 1 on /dev/ram0" \
        layout_has 1 wt /dev/ram0 lazy
    check "aio post-config: host layout has wb instance 2 on /dev/ram1" \
        layout_has 2 wb /dev/ram1 lazy
    check "aio post-config: instances started by os-brick-cas host apply" \
        host_apply_called
    check "aio post-config: layout written before host apply" \
        called_before "$OS_BRICK_CAS_HOST_LAYOUT" "host apply"
    check "aio post-config: no --force anywhere" not_called_regex '--force'
    check "aio nova.conf: host_layout" \
        ini_is "$NOVA_CONF" os_brick_cas host_layout "$OS_BRICK_CAS_HOST_LAYOUT"
    check "aio post-config: wt instance 1 running" cache_running 1 wt
    check "aio post-config: wb instance 2 running" cache_running 2 wb
    check "aio opencas.conf: version line first, [caches] and [cores]" \
        opencas_well_formed
    check "aio opencas.conf: wb instance listed, lazy (RAM disk)" \
        file_has_line "$OPEN_CAS_CONF" "$(apply_row 2 /dev/ram1 WB always lazy)"
    check "aio opencas.conf: wt instance 1 listed too (comes back warm)" \
        file_has_line "$OPEN_CAS_CONF" "$(apply_row 1 /dev/ram0 WT nhit lazy)"
    check "aio host: rootwrap filter installed" \
        cmp -s "$REPO/etc/rootwrap.d/os-brick-cas.filters" \
        "$S/etc/nova/rootwrap.d/os-brick-cas.filters"
    check "aio host: files installed by os-brick-cas host install-files" \
        called_regex "os-brick-cas host install-files --only rootwrap-filter --only udev-rule --rootwrap-dir $S/etc/nova/rootwrap.d --udev-rules-dir $S/etc/udev/rules.d"
    check "aio host: udev rule installed, its namer not in /usr/local/bin" \
        file_lacks "$S/etc/udev/rules.d/$rules" "/usr/local/bin/os-brick-cas-rbd-namer"
    check "aio host: udev rules reloaded" called "udevadm control --reload"
    check "aio nova.conf: compute_driver" ini_is "$NOVA_CONF" DEFAULT \
        compute_driver os_brick_cas_libvirt.CachedRBDLibvirtDriver
    check "aio nova.conf: [os_brick_cas_nova] enabled" \
        ini_is "$NOVA_CONF" os_brick_cas_nova enabled True
    check "aio nova.conf: cache_instances wt:1,wb:2" \
        ini_is "$NOVA_CONF" os_brick_cas cache_instances wt:1,wb:2
    check "aio nova.conf: fallback_policy fail" \
        ini_is "$NOVA_CONF" os_brick_cas fallback_policy fail
    check "aio nova.conf: no data-loss defect accepted by default" \
        ini_is "$NOVA_CONF" os_brick_cas accepted_data_loss_defects ""
    check "aio nova.conf: flush_timeout 600" \
        ini_is "$NOVA_CONF" os_brick_cas flush_timeout 600
    check "aio nova.conf: opencas_conf" \
        ini_is "$NOVA_CONF" os_brick_cas opencas_conf "$OPEN_CAS_CONF"
    check "aio nova.conf: state_path" \
        ini_is "$NOVA_CONF" os_brick_cas state_path "$OS_BRICK_CAS_STATE_PATH"
    check "aio nova.conf: lock_path shared with the CLI" \
        ini_is "$NOVA_CONF" os_brick_cas lock_path "$OS_BRICK_CAS_STATE_PATH/locks"
    check "aio: lock directory setgid, group-writable" \
        test "$(stat -c %a "$OS_BRICK_CAS_STATE_PATH/locks")" = 2770
    check "aio nova.conf: service_group the stack user's group" \
        ini_is "$NOVA_CONF" os_brick_cas service_group "$(id -gn "$STACK_USER")"
    for dir in lifecycle events locks; do
        check "aio: $dir root:<stack group> 2770 (Shared directories)" \
            test "$(stat -c %U:%G:%a "$OS_BRICK_CAS_STATE_PATH/$dir")" = \
            "root:$(id -gn "$STACK_USER"):2770"
    done
    check "aio nova.conf: resume_guests_state_on_host_boot" \
        ini_is "$NOVA_CONF" DEFAULT resume_guests_state_on_host_boot True
    check "aio nova.conf: parses" ini_parses "$NOVA_CONF"
    check "aio nova: waits for configure_neutron_nova before editing nova.conf" \
        called_before "async_wait configure_neutron_nova" "iniset $NOVA_CONF"
    check "aio nova: nothing written to nova-cpu.conf in post-config" \
        not_called "iniset $NOVA_CPU_CONF"
    check "aio cinder.conf: [ceph] volume_driver" ini_is "$CINDER_CONF" ceph \
        volume_driver cinder_ext.rbd.CachedRBDDriver
    check "aio cinder.conf: API extensions (multi-valued)" \
        ini_all_is "$CINDER_CONF" DEFAULT osapi_volume_extension \
        "cinder.api.contrib.standard_extensions cinder_ext.api.fence.Fence cinder_ext.api.type_validation.TypeValidation"
    check "aio cinder.conf: other [ceph] options kept" \
        ini_is "$CINDER_CONF" ceph rbd_pool volumes
    check "aio cinder.conf: parses" ini_parses "$CINDER_CONF"

    # post-config once more (re-stack without unstack): nothing doubled
    phase stack post-config
    check "aio post-config again: succeeds" rc_is 0
    check "aio post-config again: host apply run again (changes nothing)" \
        lines_count "$CALLS" "^os-brick-cas .* host apply" 2
    check "aio post-config again: still one wb instance 2" cache_running 2 wb
    check "aio post-config again: one opencas.conf row for instance 2" \
        opencas_rows_of 2 1
    check "aio post-config again: each API extension once" \
        lines_count "$CINDER_CONF" "^osapi_volume_extension" 3

    # stack.sh -> start_nova -> start_nova_compute: cp nova.conf nova-cpu.conf
    cp "$NOVA_CONF" "$NOVA_CPU_CONF"
    check "aio nova-cpu.conf after devstack's copy: compute_driver" \
        ini_is "$NOVA_CPU_CONF" DEFAULT compute_driver \
        os_brick_cas_libvirt.CachedRBDLibvirtDriver
    check "aio nova-cpu.conf after devstack's copy: [os_brick_cas_nova] enabled" \
        ini_is "$NOVA_CPU_CONF" os_brick_cas_nova enabled True
    check "aio nova-cpu.conf after devstack's copy: cache_instances" \
        ini_is "$NOVA_CPU_CONF" os_brick_cas cache_instances wt:1,wb:2

    phase stack extra
    check "aio extra: succeeds (nova-cpu.conf verified)" rc_is 0
    check "aio extra: cas-wt type with cacheable and cas:cache_mode=wt" \
        called "volume type create --property 'cacheable=<is> True' --property cas:cache_mode=wt cas-wt"
    check "aio extra: cas-wb type with cacheable and cas:cache_mode=wb" \
        called "volume type create --property 'cacheable=<is> True' --property cas:cache_mode=wb cas-wb"

    phase stack test-config
    check "aio test-config: succeeds" rc_is 0
    check "aio tempest.conf: [os_brick_cas_tempest] enabled" \
        ini_is "$TEMPEST_CONFIG" os_brick_cas_tempest enabled True
    check "aio tempest.conf: offered_modes wt,wb" \
        ini_is "$TEMPEST_CONFIG" os_brick_cas_tempest offered_modes wt,wb
    check "aio tempest.conf: volume_types" \
        ini_is "$TEMPEST_CONFIG" os_brick_cas_tempest volume_types wt:cas-wt,wb:cas-wb
    check "aio tempest.conf: devstack's options kept" \
        ini_is "$TEMPEST_CONFIG" auth use_dynamic_credentials True

    # an attached wb volume's core row (as os-brick-cas writes it) and an
    # operator's instance that is not the plugin's
    add_core_rows
    phase unstack
    check "aio unstack: succeeds" rc_is 0
    check "aio unstack: os-brick-cas host stop, flush bounded by OPEN_CAS_FLUSH_TIMEOUT" \
        host_stop_called
    check "aio unstack: reports each instance" \
        output_has $'cache instance 1: stopped\nos-brick-cas: cache instance 2: stopped'
    check "aio unstack: no cache left running" no_cache_running
    check "aio unstack: stopped wb instance removed from opencas.conf" \
        opencas_rows_of 2 0
    check "aio unstack: other instances' rows kept in opencas.conf" \
        opencas_rows_of 9 2

    phase clean
    check "aio clean: succeeds" rc_is 0
    check "aio clean: an old release's nova shim file removed" \
        called "os-brick-cas nova-shim remove"
    check "aio clean: rootwrap filter removed" \
        test ! -e "$S/etc/nova/rootwrap.d/os-brick-cas.filters"
    check "aio clean: udev rule removed" test ! -e "$S/etc/udev/rules.d/$rules"
    check "aio clean: os-brick-cas host forget" host_forget_called
    check "aio clean: cas_cache loaded before forget reads the metadata" \
        called_before "modprobe cas_cache" "host forget"
    check "aio clean: RAM disks unloaded after forget" \
        called_before "host forget" "rmmod brd"
    check "aio clean: host layout removed" test ! -e "$OS_BRICK_CAS_HOST_LAYOUT"
    check "aio clean: state directory removed" test ! -e "$S/data/os-brick-cas"
    safety_checks aio
}

test_flush_failure() {
    new_scenario flush-fails
    stack_until_post_config
    check "flush-fails: stacked" rc_is 0
    set_stub_env "STUB_FAIL_FLUSH=2"
    add_core_rows
    phase unstack
    check "flush-fails unstack: returns non-zero" rc_not_zero
    check "flush-fails unstack: host stop asked" host_stop_called
    check "flush-fails unstack: wb instance still running" cache_running 2 wb
    check "flush-fails unstack: the CLI's REFUSED line shown" \
        output_has "REFUSED cache instance 2 (wb): kept"
    check "flush-fails unstack: says unstack again once flushed" \
        output_has "left cache instances running"
    check "flush-fails unstack: wt instance still stopped" cache_not_running 1
    check "flush-fails unstack: its attached core's row kept (lazy)" \
        opencas_has "$(opencas_row 2 1 "$RBD_LINK")"$'\tlazy_startup=true'
    check "flush-fails unstack: wb instance stays in opencas.conf" \
        opencas_has "$(opencas_row 2 /dev/ram1 WB)"
    phase clean
    check "flush-fails clean: returns non-zero" rc_not_zero
    check "flush-fails clean: host forget keeps the running instance" \
        output_has "REFUSED cache instance 2 (wb): kept: it still runs"
    check "flush-fails clean: RAM disks kept (a cache runs on one)" \
        not_called "rmmod brd"
    check "flush-fails clean: host layout kept" test -e "$OS_BRICK_CAS_HOST_LAYOUT"
    check "flush-fails clean: wb instance stays in opencas.conf" \
        opencas_has "$(opencas_row 2 /dev/ram1 WB)"
    check "flush-fails clean: state directory kept" \
        test -e "$S/data/os-brick-cas/brd-loaded"
    set_stub_env "STUB_FAIL_FLUSH="
    phase unstack
    check "flush-fails: unstack again once the flush works" rc_is 0
    check "flush-fails: then the wb instance is stopped" cache_not_running 2
    check "flush-fails: and its opencas.conf rows dropped" opencas_rows_of 2 0
    safety_checks flush-fails

    # a cache stopped without a flush left dirty metadata on its RAM disk
    new_scenario ram-dirty
    stack_until_post_config
    : > "$STUB_STATE/caches"
    set_stub_env "STUB_CHECK_DEVICE=/dev/ram1=yes,yes,yes"
    phase clean
    check "ram-dirty clean: returns non-zero" rc_not_zero
    check "ram-dirty clean: RAM disks kept" not_called "rmmod brd"
    check "ram-dirty clean: its opencas.conf row kept" opencas_rows_of 2 1
    check "ram-dirty clean: nova shim removed anyway" \
        called "os-brick-cas nova-shim remove"

    new_scenario stop-fails
    stack_until_post_config
    set_stub_env "STUB_FAIL_STOP=2"
    phase unstack
    check "stop-fails unstack: returns non-zero" rc_not_zero
    check "stop-fails unstack: wb instance left running" cache_running 2 wb
    check "stop-fails unstack: stays in opencas.conf" \
        opencas_has "$(opencas_row 2 /dev/ram1 WB)"
    safety_checks stop-fails
}

# devstack's unstack.sh runs the plugins' unstack before stopping nova:
# servers still hold their cached volumes (/dev/casX-Y) open.
test_unstack_with_servers() {
    new_scenario servers OS_BRICK_CAS_GUEST_SHUTDOWN_TIMEOUT=1
    stack_until_post_config
    printf '%s\n' "instance-00000001 running /dev/cas2-1 /dev/rbd0" \
        "instance-00000002 running /dev/cas1-1" \
        "instance-00000003 running /dev/rbd1" \
        "instance-00000004 shut-off /dev/cas2-2" > "$STUB_STATE/domains"
    set_stub_env "STUB_GUEST_IGNORES_SHUTDOWN=instance-00000002"
    phase unstack
    check "servers unstack: succeeds" rc_is 0
    check "servers unstack: guest on the wb cache shut down" \
        called "virsh shutdown instance-00000001"
    check "servers unstack: guest ignoring shutdown powered off" \
        called "virsh destroy instance-00000002"
    check "servers unstack: a guest that shuts down is not powered off" \
        not_called "virsh destroy instance-00000001"
    check "servers unstack: guest without cached volumes left alone" \
        not_called_regex "virsh (shutdown|destroy) instance-00000003"
    check "servers unstack: guests shut down before host stop" \
        called_before "virsh shutdown instance-00000001" "host stop"
    check "servers unstack: guests powered off before host stop" \
        called_before "virsh destroy instance-00000002" "host stop"
    check "servers unstack: no cache left running" no_cache_running
    check "servers unstack: says which guests it stopped" \
        output_has "shutting down guest instance-00000001"
    safety_checks servers
}

test_build_open_cas() {
    new_scenario build
    rm "$S/bin/casadm"
    if command -v casadm >/dev/null || [[ -x /usr/sbin/casadm || -x /sbin/casadm ]]; then
        echo "SKIP: build: this host has a real casadm; the plugin would not build"
        return 0
    fi
    mkdir -p "$(dirname "$OPEN_CAS_CONF")"
    printf 'version=19.3.0\n[caches]\n9\t/dev/disk/by-id/nvme-OPERATOR\tWB\n[cores]\n' \
        > "$OPEN_CAS_CONF"
    phase stack pre-install
    check "build pre-install: compiler and kernel headers installed" \
        called_regex "^install_package linux-headers-"
    phase stack install
    check "build install: succeeds" rc_is 0
    check "build install: writes the Open CAS build manifest" \
        test -s "$S/usr/lib/opencas/os-brick-cas-build.json"
    check "build install: clones the configured repo and release tag" \
        called "git_clone https://github.com/Open-CAS/open-cas-linux $S/dest/open-cas-linux v25.12.2"
    check "build install: ocf submodule fetched" \
        called "git -C $S/dest/open-cas-linux submodule update --init ocf"
    check "build install: configure before make" called_before configure "make -j"
    check "build install: make before make install" \
        called_before "make -j" "sudo make install"
    check "build install: an existing opencas.conf survives make install" \
        opencas_has "$(opencas_row 9 /dev/disk/by-id/nvme-OPERATOR WB)"
    phase stack post-config
    check "build post-config: host apply starts the caches after the build" \
        host_apply_called
    check "build post-config: operator's opencas.conf row kept" \
        opencas_has "$(opencas_row 9 /dev/disk/by-id/nvme-OPERATOR WB)"
    new_scenario build-other-branch "OPEN_CAS_BRANCH=v24.9" \
        "OPEN_CAS_REPO=https://example.invalid/open-cas.git"
    rm "$S/bin/casadm"
    phase stack install
    check "build: OPEN_CAS_REPO/OPEN_CAS_BRANCH honoured" \
        called "git_clone https://example.invalid/open-cas.git $S/dest/open-cas-linux v24.9"
    safety_checks build
}

test_existing_metadata() {
    new_scenario dirty-metadata "STUB_CHECK_DEVICE=/dev/ram1=yes,yes,yes"
    stack_until_post_config
    check "dirty-metadata post-config: refuses (non-zero)" rc_not_zero
    check "dirty-metadata: cache not started over dirty metadata" \
        cache_not_running 2
    check "dirty-metadata: says how to load it" \
        output_has "casadm -S -d /dev/ram1 -l"
    safety_checks dirty-metadata

    new_scenario unclean-metadata "STUB_CHECK_DEVICE=/dev/ram1=yes,no,no"
    stack_until_post_config
    check "unclean-metadata post-config: refuses (non-zero)" rc_not_zero
    check "unclean-metadata: cache not started" cache_not_running 2

    # host apply never uses --force, clean metadata included
    new_scenario clean-metadata "STUB_CHECK_DEVICE=/dev/ram1=yes,yes,no"
    stack_until_post_config
    check "clean-metadata post-config: refuses too (no --force)" rc_not_zero
    check "clean-metadata: cache not started over it" cache_not_running 2
    check "clean-metadata: no --force anywhere" not_called_regex '--force'

    new_scenario load-existing "STUB_CHECK_DEVICE=/dev/ram1=yes,yes,no" \
        OPEN_CAS_LOAD_EXISTING=True
    stack_until_post_config
    check "load-existing post-config: succeeds" rc_is 0
    check "load-existing: host apply asked to load what the device holds" \
        called "host apply --load-existing"
    check "load-existing: wb instance 2 running" cache_running 2 wb

    new_scenario mode-mismatch
    mkdir -p "$STUB_STATE/sys/module/cas_cache"
    echo "cache,2,/dev/ram1,Running,wt,-" > "$STUB_STATE/caches"
    stack_until_post_config
    check "mode-mismatch post-config: refuses (non-zero)" rc_not_zero
    check "mode-mismatch: names the instance and its mode" \
        output_has "it runs in mode wt, the layout wants wb"
    check "mode-mismatch: left running in its own mode" cache_running 2 wt

    new_scenario foreign-brd
    mkdir -p "$STUB_STATE/sys/module/brd"
    stack_until_post_config
    check "foreign-brd post-config: refuses a brd it did not load" rc_not_zero
    check "foreign-brd: no modprobe brd" not_called "modprobe brd"
}

test_loop_backend() {
    local img
    new_scenario loop OPEN_CAS_CACHE_BACKEND=loop OPEN_CAS_CACHE_SIZE=64M
    stack_until_post_config
    img=$S/data/os-brick-cas/cache-wb.img
    check "loop post-config: succeeds" rc_is 0
    check "loop: no RAM disks" not_called "modprobe brd"
    check "loop: sparse file of OPEN_CAS_CACHE_SIZE" called "truncate -s 64M $img"
    check "loop: loop device with direct I/O" \
        called "losetup --find --show --direct-io=on $img"
    check "loop: by-id link to the loop device" \
        link_to "$OPEN_CAS_BY_ID_DIR/os-brick-cas-cache-wb" /dev/loop1
    check "loop: layout puts the cache on the by-id link" \
        layout_has 2 wb "$OPEN_CAS_BY_ID_DIR/os-brick-cas-cache-wb" lazy
    check "loop opencas.conf: wb row on the link, lazy" \
        file_has_line "$OPEN_CAS_CONF" \
        "$(apply_row 2 "$OPEN_CAS_BY_ID_DIR/os-brick-cas-cache-wb" WB always lazy)"
    phase unstack
    check "loop unstack: succeeds" rc_is 0
    check "loop unstack: loop devices detached after host stop" \
        called_before "host stop" "losetup -d /dev/loop0"
    check "loop unstack: both loop devices detached" \
        all_called "losetup -d /dev/loop0" "losetup -d /dev/loop1"
    phase clean
    check "loop clean: succeeds" rc_is 0
    check "loop clean: loop files removed" test ! -e "$img"
    safety_checks loop

    # a shutdown stopped the wb cache without flushing (as casctl stop does)
    # and the loop devices are gone: clean must keep its loop file
    new_scenario loop-dirty OPEN_CAS_CACHE_BACKEND=loop OPEN_CAS_CACHE_SIZE=64M
    stack_until_post_config
    img=$S/data/os-brick-cas/cache-wb.img
    : > "$STUB_STATE/caches"
    : > "$STUB_STATE/loops"
    set_stub_env "STUB_CHECK_DEVICE=$OPEN_CAS_BY_ID_DIR/os-brick-cas-cache-wb=yes,yes,yes"
    phase clean
    check "loop-dirty clean: returns non-zero" rc_not_zero
    check "loop-dirty clean: loop file attached again before host forget" \
        called_before "losetup --find --show --direct-io=on $img" "host forget"
    check "loop-dirty clean: says the loop file is kept" \
        output_has "$img kept (cache instance 2"
    check "loop-dirty clean: loop file with dirty metadata kept" test -e "$img"
    check "loop-dirty clean: its opencas.conf row kept" opencas_rows_of 2 1
    check "loop-dirty clean: the clean wt loop file removed" \
        test ! -e "$S/data/os-brick-cas/cache-wt.img"
    phase stack post-config
    check "loop-dirty re-stack: refuses to start over the dirty file" \
        rc_not_zero
    check "loop-dirty re-stack: no cache started on it" cache_not_running 2
    safety_checks loop-dirty
}

test_device_backend() {
    local dev
    new_scenario device
    dev=$OPEN_CAS_BY_ID_DIR/nvme-TEST_SSD
    touch "$dev" "$dev-part1" "$dev-part2"
    set_stub_env "OPEN_CAS_CACHE_DEVICE=$dev"
    stack_until_post_config
    check "device post-config: succeeds" rc_is 0
    check "device: wt on partition 1" layout_has 1 wt "$dev-part1"
    check "device: wb on partition 2" layout_has 2 wb "$dev-part2"
    check "device: existing partitions not touched" not_called "parted"
    check "device opencas.conf: wb row, not lazy (a real SSD)" \
        file_has_line "$OPEN_CAS_CONF" "$(apply_row 2 "$dev-part2" WB always)"

    new_scenario device-unpartitioned
    dev=$OPEN_CAS_BY_ID_DIR/nvme-TEST_SSD
    touch "$dev"
    set_stub_env "OPEN_CAS_CACHE_DEVICE=$dev"
    stack_until_post_config
    check "device-unpartitioned: refuses without opt-in" rc_not_zero
    check "device-unpartitioned: does not repartition" not_called "parted"

    new_scenario device-partition OPEN_CAS_PARTITION_CACHE_DEVICE=True
    dev=$OPEN_CAS_BY_ID_DIR/nvme-TEST_SSD
    touch "$dev"
    set_stub_env "OPEN_CAS_CACHE_DEVICE=$dev"
    stack_until_post_config
    check "device-partition: succeeds with opt-in" rc_is 0
    check "device-partition: GPT label, two halves" \
        all_called "parted -s $dev mklabel gpt" "mkpart os-brick-cas-1 0% 50%" \
        "mkpart os-brick-cas-2 50% 100%"

    new_scenario device-list "OPEN_CAS_MODES=wt wb wo"
    touch "$OPEN_CAS_BY_ID_DIR"/ssd-{a,b,c}
    set_stub_env "OPEN_CAS_CACHE_DEVICES=$OPEN_CAS_BY_ID_DIR/ssd-a $OPEN_CAS_BY_ID_DIR/ssd-b $OPEN_CAS_BY_ID_DIR/ssd-c"
    stack_until_post_config
    check "device-list: succeeds" rc_is 0
    check "device-list: wo instance 3 on the third device" \
        layout_has 3 wo "$OPEN_CAS_BY_ID_DIR/ssd-c"
    check "device-list: wo instance listed in opencas.conf" \
        file_has_line "$OPEN_CAS_CONF" "$(apply_row 3 "$OPEN_CAS_BY_ID_DIR/ssd-c" WO always)"
    check "device-list: nova cache_instances wt:1,wb:2,wo:3" \
        ini_is "$NOVA_CONF" os_brick_cas cache_instances wt:1,wb:2,wo:3
    phase unstack
    check "device-list unstack: wo instance stopped by host stop" \
        cache_not_running 3
    safety_checks device
}

test_validation_and_roles() {
    new_scenario bad-mode "OPEN_CAS_MODES=wt xx"
    phase stack pre-install
    check "settings check: unknown mode refused" rc_not_zero
    new_scenario twice-mode "OPEN_CAS_MODES=wb wb"
    phase stack pre-install
    check "settings check: a mode listed twice refused" rc_not_zero
    new_scenario order DEVSTACK_PLUGINS=devstack-plugin-ceph,os-brick-cas
    phase stack pre-install
    check "settings check: Ceph's plugin enabled first is not fatal" rc_is 0
    check "settings check: ... but warned about (unstack order)" \
        output_has "Put 'enable_plugin os-brick-cas' first"

    new_scenario no-copy
    stack_until_post_config
    phase stack extra
    check "no-copy: extra fails if nova-cpu.conf lacks the driver" rc_not_zero

    new_scenario existing-type STUB_EXISTING_TYPES=cas-wb
    stack_until_post_config
    cp "$NOVA_CONF" "$NOVA_CPU_CONF"
    phase stack extra
    check "existing-type: existing cas-wb updated" \
        called "volume type set --property 'cacheable=<is> True' --property cas:cache_mode=wb cas-wb"
    check "existing-type: cas-wb not created again" \
        not_called "volume type create --property 'cacheable=<is> True' --property cas:cache_mode=wb"

    new_scenario compute-only ENABLED_SERVICES=n-cpu
    cp "$CINDER_CONF" "$S/cinder.conf.before"
    stack_until_post_config
    check "compute-only: succeeds" rc_is 0
    check "compute-only: cinder.conf untouched" \
        cmp -s "$CINDER_CONF" "$S/cinder.conf.before"
    cp "$NOVA_CONF" "$NOVA_CPU_CONF"
    phase stack extra
    check "compute-only: no volume types" not_called "volume type"

    new_scenario volume-only ENABLED_SERVICES=c-api,c-vol,c-sch
    stack_until_post_config
    check "volume-only: succeeds" rc_is 0
    check "volume-only: no caches" not_called "casadm"
    check "volume-only: no nova shim" not_called "nova-shim"
    check "volume-only: cinder configured" ini_is "$CINDER_CONF" ceph \
        volume_driver cinder_ext.rbd.CachedRBDDriver

    new_scenario other-backend OS_BRICK_CAS_CINDER_BACKEND=rbd-fast
    stack_until_post_config
    check "other-backend: refuses a backend section that does not exist" \
        rc_not_zero
    check "other-backend: says which section is missing" \
        output_has "no [rbd-fast] backend"
}

# The stub commands: a small script made of this file's stub functions
# (much faster to start than this whole file).
write_stub_script() {
    {
        echo '#!/bin/bash'
        echo 'set -euo pipefail'
        # shellcheck disable=SC2046
        declare -f _q record _inside _stub_arg run_stub \
            _virsh_running_with _virsh_set_state _stub_host_layout \
            _stub_forget_rows _stub_running_mode _stub_kept \
            $(compgen -A function stub_)
        # shellcheck disable=SC2016
        echo 'run_stub "$(basename "$0")" "$@"'
    } > "$WORK/stub"
    chmod +x "$WORK/stub"
}

main() {
    local started=$SECONDS
    HOST_PATH=$PATH
    # the interpreter itself, not a version-manager shim (much faster)
    PYTHON=$(python3 -c 'import sys; print(sys.executable)')
    WORK=$(mktemp -d)
    if [[ "${KEEP:-0}" != 1 ]]; then
        trap 'rm -rf "$WORK"' EXIT
    fi
    write_stub_script
    test_settings
    test_all_in_one
    test_flush_failure
    test_unstack_with_servers
    test_build_open_cas
    test_existing_metadata
    test_loop_backend
    test_device_backend
    test_validation_and_roles
    echo "$PASSES passed, $FAILURES failed ($((SECONDS - started)) s)"
    if [[ "${KEEP:-0}" == 1 ]]; then
        echo "call logs and files kept in $WORK"
    elif [[ $FAILURES != 0 ]]; then
        echo "rerun with KEEP=1 to keep the call logs and files"
    fi
    [[ $FAILURES == 0 ]]
}

if [[ "${1:-}" == __child ]]; then
    shift
    child "$@"
else
    main "$@"
fi
