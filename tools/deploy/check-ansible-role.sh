#!/bin/bash
# The os_brick_cas role and its example playbook with ansible-core against
# an openstack-ansible-style inventory (tools/deploy/osa-inventory/, with
# deploy/openstack-ansible/group_vars/ copied beside it as in
# /etc/openstack_deploy/), on this machine (connection local; only the
# role's preflight tasks run, which change nothing):
# - the playbook runs on OSA's compute_hosts and fails, not exits 0, on an
#   inventory without them;
# - each host's resolved variables: host_vars over group_vars over the
#   role's defaults, the OSA virtualenv path, nova's rootwrap directory;
# - the role installs the rootwrap filter and the exporter's unit through
#   "os-brick-cas host install-files".
# Usage: check-ansible-role.sh ANSIBLE_VENV
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=$1
fail() { echo "FAIL (ansible role): $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r tools/deploy/osa-inventory "$work/inventory"
cp -r deploy/openstack-ansible/group_vars/compute_hosts "$work/inventory/group_vars/"
export ANSIBLE_ROLES_PATH=$PWD/deploy/ansible/roles LC_ALL=C.UTF-8 \
    ANSIBLE_NOCOLOR=1 ANSIBLE_LOCAL_TEMP=$work/tmp HOME=$work \
    ANSIBLE_PYTHON_INTERPRETER=$venv/bin/python
playbook=deploy/ansible/os-brick-cas-host.yml

hosts=$("$venv/bin/ansible-playbook" -i "$work/inventory" "$playbook" \
    --list-hosts 2>&1) || fail "--list-hosts: $hosts"
for host in compute1 compute2; do
    echo "$hosts" | grep -q "^ *$host\$" ||
        fail "the playbook does not run on OSA's compute_hosts ($host): $hosts"
done
if echo "$hosts" | grep -q '^ *infra1$'; then
    fail "the playbook runs on infra1"
fi

# an inventory without the group: a loud failure, not "no hosts matched"
printf 'all:\n  children:\n    compute:\n      hosts:\n        node1:\n' > "$work/other.yml"
if out=$("$venv/bin/ansible-playbook" -i "$work/other.yml" "$playbook" \
        --tags os_brick_cas_preflight 2>&1); then
    fail "the playbook exits 0 on an inventory without compute_hosts: $out"
fi
echo "$out" | grep -q 'No host of the inventory matches' ||
    fail "no clear failure without compute_hosts: $out"

out=$(ANSIBLE_GATHERING=explicit ANSIBLE_STDOUT_CALLBACK=oneline "$venv/bin/ansible-playbook" \
    -i "$work/inventory" "$playbook" -c local --tags os_brick_cas_preflight \
    2>&1) || fail "preflight run: $out"
echo "$out" | "$venv/bin/python" -c '
import json
import sys
import yaml

resolved = {}
for line in sys.stdin:
    host, sep, rest = line.partition(" | SUCCESS => ")
    if sep and "\"msg\"" in rest:
        msg = json.loads(rest)["msg"]
        if isinstance(msg, dict) and "bin_dir" in msg:
            resolved[host.strip()] = msg
assert sorted(resolved) == ["compute1", "compute2"], resolved
defaults = yaml.safe_load(open(
    "deploy/ansible/roles/os_brick_cas/defaults/main.yml"))
one, two = resolved["compute1"], resolved["compute2"]
# group_vars (the OSA sample) over the role defaults
assert one["bin_dir"] == "/openstack/venvs/nova-31.0.0/bin", one
assert one["nova_rootwrap_dir"] == "/etc/nova/rootwrap.d", one
assert one["opencas_tarball"].endswith("v25.12.2.tar.xz"), one
assert one["host_layout"] == {}, one
assert one["exporter_enabled"] in (True, "True"), one
# host_vars over group_vars
assert two["bin_dir"] == "/openstack/venvs/nova-31.0.1/bin", two
assert two["host_layout"]["instances"][0]["device"].endswith(
    "COMPUTE2_SSD-part1"), two
# a value no inventory sets: the role default
assert one["lock_path"] == defaults["os_brick_cas_lock_path"], one
print("ansible role: compute1 and compute2 resolve their inventory values")
' || fail "resolved variables (host_vars > group_vars > role defaults): $out"

# the role installs the rootwrap filter and the exporter unit (through the
# CLI, which renders them for this installation)
product=deploy/ansible/roles/os_brick_cas/tasks/product.yml
for kind in rootwrap-filter exporter-unit udev-rule nova-compute-dropin; do
    grep -q "'$kind'" "$product" || fail "the role does not install $kind"
done
grep -q "'host', 'install-files'" "$product" ||
    fail "the role does not run os-brick-cas host install-files"
grep -q 'os-brick-cas-exporter.service' "$product" ||
    fail "the role does not enable the exporter"
echo "ansible role: OSA-style inventory OK"

# the upgrade check before casadm and the module are replaced, against a
# stand-in casadm: SCENARIO/{version,list,stats,check} are its answers
fake=$work/casadm
cat > "$fake" <<'SH'
#!/bin/bash
dir=$(dirname "$0")/scenario
case " $* " in
    *" -V "*) cat "$dir/version" ;;
    *" -L "*) cat "$dir/list" ;;
    *" -P "*) cat "$dir/stats" ;;
    *" --check-cache-device "*) cat "$dir/check" ;;
    *) exit 1 ;;
esac
SH
chmod +x "$fake"
staged=25.12.2.0000
scenario() {  # NAME LOADED_RELEASE(or -) LIST_ROWS DIRTY_BLOCKS CHECK_ROW
    rm -rf "$work/scenario" "$work/sys-cas"
    mkdir -p "$work/scenario"
    if [ "$2" != - ]; then
        mkdir "$work/sys-cas"
        printf 'Name,Version\nCAS Cache Kernel Module,%s\nCAS CLI Utility,%s\n' \
            "$2" "$2" > "$work/scenario/version"
    else
        printf 'Name,Version\nCAS CLI Utility,24.9.0.0000\n' > "$work/scenario/version"
    fi
    printf 'type,id,disk,status,write policy,device\n%b' "$3" > "$work/scenario/list"
    printf 'Occupancy [4KiB Blocks],Dirty [4KiB Blocks]\n100,%s\n' "$4" > "$work/scenario/stats"
    printf 'Is cache,Clean Shutdown,Cache dirty\n%s\n' "$5" > "$work/scenario/check"
    ANSIBLE_GATHERING=explicit "$venv/bin/ansible-playbook" -i localhost, \
        tools/deploy/role-upgrade-check.yml \
        -e "os_brick_cas_casadm=$fake os_brick_cas_module_sysfs=$work/sys-cas" \
        -e "os_brick_cas_release=$staged" \
        -e '{"os_brick_cas_host_layout": {"version": 1, "instances": [{"id": 2, "mode": "wb", "device": "/dev/disk/by-id/nvme-X-part2"}]}}' 2>&1
}
running='cache,2,/dev/disk/by-id/nvme-X-part2,Running,wb,-\ncore,1,/dev/disk/by-id/rbd-cas-x,Active,-,/dev/cas2-1\n'
out=$(scenario other-release-dirty 24.9.0.0000 "$running" 42 'yes,no,yes') &&
    fail "upgrade over a loaded 24.9 with a dirty wb instance passed: $out"
echo "$out" | grep -q 'Open CAS 24.9.0.0000 is loaded with 1 cache instance' ||
    fail "no clear refusal over a loaded other release: $out"
echo "$out" | grep -q 'instance 2 (wb) holds 42 dirty' ||
    fail "the refusal does not say the dirty data: $out"
out=$(scenario same-release-dirty $staged "$running" 42 'yes,no,yes') ||
    fail "a re-run of the same release with dirty data was refused: $out"
out=$(scenario unloaded-dirty-metadata - '' 0 'yes,no,yes') &&
    fail "upgrade over dirty metadata of an unloaded release passed: $out"
echo "$out" | grep -q 'nvme-X-part2 hold(s) Open CAS metadata with dirty' ||
    fail "no clear refusal over dirty metadata: $out"
out=$(scenario other-release-idle 24.9.0.0000 '' 0 'yes,yes,no') ||
    fail "upgrade over a loaded release without caches, clean metadata was refused: $out"
# and it runs before casadm and the module files are replaced
awk '/include_tasks: upgrade-check.yml/ && !check {check = NR}
     /^- name: Install Open CAS/ && !install {install = NR}
     END {exit !(check && install && check < install)}' \
    deploy/ansible/roles/os_brick_cas/tasks/opencas.yml ||
    fail "opencas.yml replaces Open CAS before its upgrade check"
echo "ansible role: the Open CAS upgrade check refuses over dirty data and a loaded release's caches"
