#!/bin/bash
# The virtualenv with ansible-core and ansible-lint (pinned, from PyPI) for
# the os_brick_cas role: its lint (tools/check-deploy-artifacts.sh)
# and its run in the real-kernel guest (tools/run-ansible-tests.sh); and
# kolla-ansible, whose merge_configs action and variables the deploy suite
# runs on deploy/kolla (tools/deploy/; its ansible tree is
# VENV/share/kolla-ansible/ansible). Kept
# apart from the product's .venv and outside the tree (flake8 does not
# look there). Prints the virtualenv's path; creates it when missing
# (about 12 s).
#   ANSIBLE_VENV  where (default: $XDG_CACHE_HOME/os-brick-cas/..., else
#                 /var/cache/os-brick-cas/...)
set -euo pipefail
ANSIBLE_CORE_VERSION=2.19.14
ANSIBLE_LINT_VERSION=26.10.1
# OpenStack 2026.1, the newest kolla-ansible on PyPI: the images are built
# with kolla 23.0.0 (2026.2), whose kolla-ansible 23 is not released there.
# It needs ansible-core >=2.19,<2.21 (not 2.19.0): the pin above fits.
KOLLA_ANSIBLE_VERSION=22.2.0
name=venv-ansible-core-$ANSIBLE_CORE_VERSION-lint-$ANSIBLE_LINT_VERSION-kolla-ansible-$KOLLA_ANSIBLE_VERSION
if [ -n "${XDG_CACHE_HOME:-}" ]; then
    venv=${ANSIBLE_VENV:-$XDG_CACHE_HOME/os-brick-cas/$name}
else
    venv=${ANSIBLE_VENV:-/var/cache/os-brick-cas/$name}
fi
if [ ! -x "$venv/bin/ansible-lint" ] || [ ! -x "$venv/bin/ansible-playbook" ] ||
        [ ! -f "$venv/share/kolla-ansible/ansible/action_plugins/merge_configs.py" ]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q "ansible-core==$ANSIBLE_CORE_VERSION" \
        "ansible-lint==$ANSIBLE_LINT_VERSION" \
        "kolla-ansible==$KOLLA_ANSIBLE_VERSION" >&2 ||
        { rm -rf "$venv"; echo "could not install ansible-core/ansible-lint/kolla-ansible" >&2; exit 1; }
fi
echo "$venv"
