#!/bin/bash
# Demonstrates that nova keeps loading os-brick-cas's driver across nova
# reinstalls, without a file in nova's tree (issue 16 point 4):
#   tools/demo-nova-reinstall.sh VENV [NOVA_SDIST]
# VENV: a virtualenv with nova 34 and nova's test fixtures' dependencies
# (testtools, fixtures, wsgi-intercept, ...) installed. Steps: install this
# checkout (wheel), load the driver through nova.virt.driver.
# load_compute_driver, reinstall nova (pip --force-reinstall --no-deps),
# load again, switch to an editable os-brick-cas, load again, and with
# NOVA_SDIST (nova-34.0.0.tar.gz) an editable nova, load again.
# Modifies VENV: use a throwaway one.
set -euo pipefail
VENV=$(readlink -f "$1")
SDIST=${2:-}
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=$VENV/bin/python
PIP=("$PY" -m pip -q --disable-pip-version-check)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/load.py" <<'PY'
import os
import warnings
warnings.simplefilter('ignore')
import nova.conf
from nova.tests.fixtures import libvirt as fakelibvirt
import nova.virt
from nova.virt import driver
nova.conf.CONF([], project='nova')
fakelibvirt.LibvirtFixture().setUp()
loaded = driver.load_compute_driver(
    None, 'os_brick_cas_libvirt.CachedRBDLibvirtDriver')
virt = os.path.dirname(nova.virt.__file__)
print('  nova from %s' % os.path.dirname(os.path.dirname(virt)))
print('  load_compute_driver -> %s.%s' % (type(loaded).__module__,
                                         type(loaded).__name__))
print('  os_brick* files in nova/virt: %s'
      % [f for f in os.listdir(virt) if 'os_brick' in f])
PY
load() {
    echo "== $1"
    "$PY" "$WORK/load.py" 2>/dev/null
}
nova_version() { "$PY" -m pip show nova 2>/dev/null | sed -n 's/^Version: //p'; }

"${PIP[@]}" uninstall -y os-brick-cas >/dev/null 2>&1 || true
"${PIP[@]}" wheel --no-deps -w "$WORK" "$REPO" >/dev/null 2>&1
"${PIP[@]}" install --no-deps "$WORK"/os_brick_cas-*.whl >/dev/null 2>&1
echo "installed: $(echo "$VENV"/lib/python3*/site-packages/os_brick_cas_nova.pth)"
load "os-brick-cas wheel, nova $(nova_version) from PyPI"
"${PIP[@]}" install --force-reinstall --no-deps "nova==$(nova_version)" \
    >/dev/null 2>&1
load "after pip install --force-reinstall --no-deps nova"
"${PIP[@]}" uninstall -y os-brick-cas >/dev/null 2>&1
"${PIP[@]}" install --no-deps -e "$REPO" >/dev/null 2>&1
load "editable os-brick-cas ($REPO)"
if [[ -n "$SDIST" ]]; then
    tar -C "$WORK" -xzf "$SDIST"
    src=$(echo "$WORK"/nova-*/)
    PBR_VERSION=$(basename "$src" | sed 's/^nova-//') \
        "${PIP[@]}" install --no-deps -e "$src" >/dev/null 2>&1
    load "editable nova ($src)"
    "${PIP[@]}" install --force-reinstall --no-deps "nova==$(nova_version)" \
        >/dev/null 2>&1
    load "back to nova $(nova_version) from PyPI"
fi
echo "== nova-shim check"
"$VENV/bin/os-brick-cas" nova-shim check 2>/dev/null
