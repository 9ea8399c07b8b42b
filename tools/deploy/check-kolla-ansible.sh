#!/bin/bash
# deploy/kolla's globals and /etc/kolla/config files through kolla-ansible's
# own code (kolla-ansible from PyPI, in tools/ansible-venv.sh's virtualenv),
# on this machine with kolla's all-in-one inventory (connection local):
# - tools/deploy/kolla-volumes.yml: the nova_compute container's volumes;
# - tools/deploy/kolla-merge-configs.yml: kolla's merge_configs action
#   merges deploy/kolla/config into kolla's rendered nova.conf and
#   cinder.conf, which tools/deploy/check-kolla-merge.py then checks with
#   the product's options (with PYTHON, the project's virtualenv's, this
#   tree first on PYTHONPATH).
# Variables: kolla-ansible's group_vars and role defaults, then as extra
# vars (kolla-ansible's own order) tools/deploy/kolla-site-globals.yml,
# deploy/kolla/globals-os-brick-cas.yml and kolla's sample passwords.yml.
#   tools/deploy/check-kolla-ansible.sh ANSIBLE_VENV PYTHON
# About 7 s (ansible-playbook 6 s of it: each merge_configs run ~0.5 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
ansible_venv=$1
python=$2
kolla_ansible=$ansible_venv/share/kolla-ansible
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 ANSIBLE_TRANSFORM_INVALID_GROUP_CHARS=ignore \
    ANSIBLE_ACTION_PLUGINS=$kolla_ansible/ansible/action_plugins \
    ANSIBLE_FILTER_PLUGINS=$kolla_ansible/ansible/filter_plugins
"$ansible_venv/bin/ansible-playbook" -i "$kolla_ansible/ansible/inventory/all-in-one" \
    -e "kolla_ansible_dir=$kolla_ansible/ansible" \
    -e "node_custom_config=$PWD/deploy/kolla/config" -e "kolla_check_dest=$work" \
    -e @tools/deploy/kolla-site-globals.yml -e @deploy/kolla/globals-os-brick-cas.yml \
    -e "@$kolla_ansible/etc_examples/kolla/passwords.yml" \
    tools/deploy/kolla-volumes.yml tools/deploy/kolla-merge-configs.yml > "$work/ansible.log" 2>&1 ||
    { cat "$work/ansible.log" >&2; echo "FAIL: kolla-ansible's variables or merge_configs" >&2; exit 1; }
version=$("$ansible_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("kolla-ansible"))')
echo "kolla-ansible $version: nova_compute has os-brick-cas's volumes and kolla's"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONWARNINGS=ignore "$python" \
    tools/deploy/check-kolla-merge.py "$work/merges.json"
