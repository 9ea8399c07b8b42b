#!/bin/bash
# Checks the deployment artefacts under deploy/ with the tools themselves:
# - deploy/kolla/template-overrides.j2 rendered by kolla's own
#   "kolla-build --template-only" (kolla from PyPI, the release matching the
#   nova/cinder this tree is tested with) for an Ubuntu and a Rocky base:
#   casadm is built from the Open CAS release the devstack plugin uses,
#   os-brick-cas is installed into nova-compute, cinder-volume and
#   cinder-api, nova-compute has its rootwrap filter, each image ends as
#   its own user;
# - the YAML files parse and are yamllint-clean;
# - the os_brick_cas Ansible role is ansible-lint clean (production profile);
# - the role and its example playbook with ansible-core against an
#   openstack-ansible-style inventory (tools/deploy/check-ansible-role.sh):
#   the playbook runs on compute_hosts and fails on an inventory without
#   them, host_vars win over group_vars (deploy/openstack-ansible/
#   group_vars/) and the role's defaults, the role installs nova's
#   rootwrap filter and the exporter's unit, and refuses to replace Open
#   CAS over a loaded release's caches or dirty metadata;
# - no document runs the CLI in kolla's nova_compute without -u root
#   (tools/deploy/check-docker-exec.py);
# - deploy/kolla's globals and /etc/kolla/config files through kolla-ansible
#   22.2.0's own code (from PyPI; OpenStack 2026.1, the newest on PyPI:
#   kolla-ansible 23 for kolla 23.0.0's 2026.2 is not released there), on
#   this machine with connection local (tools/deploy/check-kolla-ansible.sh):
#   the nova_compute container's volumes from its variables, and its
#   merge_configs action merging deploy/kolla/config into its own rendered
#   nova.conf and cinder.conf, checked with the product's registered
#   options (PROJECT_PYTHON: the project's python, default .venv/bin/python,
#   else python3).
#   Not checked: an actual container deployment.
# Uses its own virtualenvs (DEPLOY_VENV, and tools/ansible-venv.sh's for
# ansible-lint and kolla-ansible; default outside the tree, where flake8
# does not look): kolla pins versions that must not reach the product's
# .venv. About 25 s once the venvs exist, 7 s of it the kolla-ansible
# check (about 1 min more to create them).
set -euo pipefail
cd "$(dirname "$0")/.."
KOLLA_VERSION=${KOLLA_VERSION:-23.0.0}   # OpenStack 2026.2: nova 34, cinder 29
VENV=${DEPLOY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/os-brick-cas/venv-kolla-$KOLLA_VERSION}
if [ ! -x "$VENV/bin/kolla-build" ] || ! "$VENV/bin/python" -c \
        "import importlib.metadata as m, sys; sys.exit(m.version('kolla') != '$KOLLA_VERSION')"; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "kolla==$KOLLA_VERSION" docker yamllint
fi
"$VENV/bin/python" -c 'import yamllint' 2>/dev/null ||
    "$VENV/bin/pip" install -q yamllint

fail() { echo "FAIL: $*" >&2; exit 1; }
# the Open CAS release the images build casadm from = the devstack plugin's
# host module release (one Open CAS line per cloud)
# shellcheck disable=SC2016  # a literal ${...} of devstack/settings
devstack_release=$(sed -n 's/^OPEN_CAS_BRANCH=\${OPEN_CAS_BRANCH:-v\(.*\)}$/\1/p' devstack/settings)
template_release=$(sed -n "s/^{% set os_brick_cas_open_cas_version = '\(.*\)' %}$/\1/p" \
    deploy/kolla/template-overrides.j2)
if [ -z "$template_release" ] || [ "$template_release" != "$devstack_release" ]; then
    fail "kolla template builds casadm $template_release, devstack uses $devstack_release"
fi

filters=share/os-brick-cas/etc/nova/rootwrap.d/os-brick-cas.filters
grep -q "^ *${filters%/*} = etc/rootwrap.d/\*$" setup.cfg ||
    fail "setup.cfg does not install the rootwrap filter as ${filters%/*}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for base in ubuntu rocky; do
    "$VENV/bin/kolla-build" --template-only --work-dir "$work/$base" \
        --base "$base" --config-file deploy/kolla/kolla-build.conf \
        --template-override deploy/kolla/template-overrides.j2 \
        nova-compute cinder-volume cinder-api > "$work/$base.log" 2>&1 ||
        { cat "$work/$base.log"; fail "kolla-build --template-only ($base)"; }
    for image in nova/nova-compute cinder/cinder-volume cinder/cinder-api; do
        file=$work/$base/docker/$image/Dockerfile
        [ -f "$file" ] || fail "$base: no $image Dockerfile rendered"
        grep -q 'python3 -m pip --no-cache-dir install --upgrade -c /requirements/upper-constraints.txt /additions/os-brick-cas' "$file" ||
            fail "$base $image: os-brick-cas is not installed"
        # an empty line inside a RUN continuation breaks newer builders
        if awk 'prev ~ /\\$/ && $0 ~ /^[ \t]*$/ {bad=1} {prev=$0} END {exit !bad}' "$file"; then
            fail "$base $image: empty line inside a RUN continuation"
        fi
    done
    for pair in nova/nova-compute:nova cinder/cinder-volume:cinder; do
        file=$work/$base/docker/${pair%%:*}/Dockerfile
        if ! grep -q "open-cas-linux-v$template_release.tar.xz" "$file" ||
                ! grep -q 'install -m 0755 /tmp/open-cas/casadm/casadm /usr/sbin/casadm' "$file"; then
            fail "$base ${pair%%:*}: casadm is not built"
        fi
        last_user=$(grep '^USER ' "$file" | tail -n 1)
        [ "$last_user" = "USER ${pair##*:}" ] ||
            fail "$base ${pair%%:*}: ends as '$last_user'"
    done
    # nova-compute starts os-brick-cas's privsep daemons through
    # nova-rootwrap, which reads /etc/nova/rootwrap.d; pip installs the
    # filter under the image venv's share/ (setup.cfg's data_files)
    grep -q "install -m 0644 /var/lib/kolla/venv/$filters /etc/nova/rootwrap.d/" \
        "$work/$base/docker/nova/nova-compute/Dockerfile" ||
        fail "$base nova-compute: os-brick-cas's rootwrap filter is not installed"
    echo "kolla $KOLLA_VERSION $base: nova-compute, cinder-volume, cinder-api render"
done

yaml_files=(deploy/openstack-ansible/*.yml deploy/openstack-ansible/group_vars/*/*.yml
            deploy/kolla/*.yml etc/host-layout.yaml.sample
            tools/deploy/osa-inventory/*.yml tools/deploy/osa-inventory/*/*.yml)
"$VENV/bin/yamllint" --strict -d '{extends: default, rules: {line-length: {max: 100}, document-start: disable}}' \
    "${yaml_files[@]}" || fail "yamllint"
"$VENV/bin/python" - "${yaml_files[@]}" <<'PY' || fail "YAML does not parse as expected"
import sys
import yaml
for path in sys.argv[1:]:
    with open(path) as handle:
        data = yaml.safe_load(handle)
    assert isinstance(data, dict) and data, path
osa = yaml.safe_load(open('deploy/openstack-ansible/user_variables_os_brick_cas.yml'))
for key in ('nova_user_pip_packages', 'cinder_user_pip_packages',
            'openstack_host_specific_kernel_modules',
            'openstack_host_extra_distro_packages',
            'nova_nova_conf_overrides', 'cinder_cinder_conf_overrides'):
    assert osa.get(key), key
assert osa['nova_nova_conf_overrides']['os_brick_cas']['cache_instances']
print('YAML: %d files parse' % len(sys.argv[1:]))
PY
# the os_brick_cas Ansible role, its example playbook, the playbooks the
# real-kernel tier runs it with (tools/run-ansible-tests.sh) and those of
# the kolla-ansible check (kolla's merge_configs action: its action_plugins):
# ansible-lint's production profile, in its own pinned virtualenv
ansible_venv=$(tools/ansible-venv.sh) || fail "no ansible-lint virtualenv"
(cd deploy/ansible && ANSIBLE_ROLES_PATH=$PWD/roles LC_ALL=C.UTF-8 \
    ANSIBLE_ACTION_PLUGINS=$ansible_venv/share/kolla-ansible/ansible/action_plugins \
    "$ansible_venv/bin/ansible-lint" --nocolor --offline -c .ansible-lint \
    os-brick-cas-host.yml roles/ ../../tools/kernel/ansible-build.yml \
    ../../tools/kernel/ansible-guest.yml ../../tools/deploy/kolla-*.yml \
    ../../tools/deploy/role-upgrade-check.yml) || fail "ansible-lint"
tools/deploy/check-ansible-role.sh "$ansible_venv" || fail "ansible role"
# kolla's nova_compute runs as nova: every documented docker exec of the
# CLI there needs -u root
tools/deploy/check-docker-exec.py || fail "docker exec without -u root"
if [ -z "${PROJECT_PYTHON:-}" ]; then
    PROJECT_PYTHON=python3
    [ -x .venv/bin/python ] && PROJECT_PYTHON=.venv/bin/python
fi
"$PROJECT_PYTHON" -c 'import oslo_config' 2>/dev/null ||
    fail "$PROJECT_PYTHON has no oslo.config: set PROJECT_PYTHON to the project's virtualenv's (tools/setup-env.sh)"
tools/deploy/check-kolla-ansible.sh "$ansible_venv" "$PROJECT_PYTHON" || fail "kolla-ansible"
echo "deploy artefacts OK"
