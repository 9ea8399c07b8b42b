#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""Does this host bring its caches back before nova-compute after a boot?

Open CAS's own ``open-cas.service`` (``casctl settle``) loads the caches
listed in opencas.conf at boot and sends the host to emergency mode when a
listed device that is not ``lazy_startup=true`` is missing. The drop-in
``etc/systemd/nova-compute.service.d/os-brick-cas.conf`` orders
nova-compute after it; krbd cores must be lazy (their device only returns
when nova maps the volume again). Files are read under ``host_root``.
"""

import configparser
import glob
import os

from oslo_config import cfg

from os_brick_cas.opencas import opencas_conf
from os_brick_cas import opts

CONF = cfg.CONF
OPEN_CAS_UNIT = 'open-cas.service'
DROPIN = 'os-brick-cas.conf'
UNIT_DIRS = ('etc/systemd/system', 'run/systemd/system',
             'usr/lib/systemd/system', 'lib/systemd/system')
Finding = tuple[str, str]


def unit_file(root: str, unit: str) -> str:
    """Path of *unit*'s file under *root*, or '' when not installed."""
    for directory in UNIT_DIRS:
        path = os.path.join(root, directory, unit)
        if os.path.exists(path):
            return path
    return ''


def dropin_values(root: str, unit: str) -> dict[str, set[str]]:
    """[Unit] After=/Wants=/Requires= of every drop-in of *unit*."""
    values: dict[str, set[str]] = {}
    for directory in UNIT_DIRS:
        pattern = os.path.join(root, directory, unit + '.d', '*.conf')
        for path in sorted(glob.glob(pattern)):
            parser = configparser.ConfigParser(strict=False,
                                               interpolation=None)
            parser.optionxform = str
            try:
                parser.read(path)
            except configparser.Error:
                continue
            if parser.has_section('Unit'):
                for key in ('After', 'Wants', 'Requires'):
                    values.setdefault(key, set()).update(
                        parser.get('Unit', key, fallback='').split())
    return values


def _eager_core_rows(path: str) -> list[str]:
    """[cores] rows without lazy_startup=true (boot waits for them)."""
    try:
        with open(path) as conf_file:
            text = conf_file.read()
    except OSError:
        return []
    rows, section = [], None
    for line in text.splitlines():
        content = line.split('#')[0].strip()
        if content in ('[caches]', '[cores]'):
            section = content
        elif section == '[cores]' and content and (
                opencas_conf.LAZY_STARTUP not in content.split()[-1]):
            rows.append(content)
    return rows


def findings(conf: cfg.ConfigOpts = CONF) -> list[Finding]:
    """(level, message) about the boot order and lazy core rows."""
    group = conf[opts.GROUP]
    root = group.host_root
    result: list[Finding] = []
    if not os.path.isdir(os.path.join(root, 'run', 'systemd', 'system')):
        # sd_booted(3): systemd is not the init system here
        result.append(('SKIP', 'systemd does not run under %s (a '
                               'container?): boot order not checked here; '
                               'run doctor on the host' % root))
    else:
        result += _unit_findings(root, group.nova_compute_units)
    for row in _eager_core_rows(group.opencas_conf):
        result.append(('FAIL', '%s lists core "%s" without lazy_startup='
                               'true: at boot open-cas.service waits for '
                               'its krbd device, which only returns when '
                               'nova maps the volume, and then sends the '
                               'host to emergency mode. Add lazy_startup='
                               'true to the row.' % (group.opencas_conf,
                                                     row)))
    return result


def _unit_findings(root: str, nova_units: list[str]) -> list[Finding]:
    result: list[Finding] = []
    if not unit_file(root, OPEN_CAS_UNIT):
        result.append(('WARN', '%s is not installed: nothing loads the '
                               'caches of opencas.conf at boot (install '
                               "Open CAS's utils: make -C utils "
                               'install_files).' % OPEN_CAS_UNIT))
    units = [unit for unit in nova_units if unit_file(root, unit)]
    if not units:
        result.append(('WARN', 'no nova-compute systemd unit (%s) under %s: '
                               'boot order not checked; add the unit '
                               'running nova-compute to [os_brick_cas] '
                               'nova_compute_units' % (
                                   ', '.join(nova_units), root)))
    for unit in units:
        values = dropin_values(root, unit)
        after = OPEN_CAS_UNIT in values.get('After', set())
        wanted = OPEN_CAS_UNIT in (values.get('Wants', set()) |
                                   values.get('Requires', set()))
        if after and wanted:
            result.append(('OK', '%s starts after %s' % (unit,
                                                         OPEN_CAS_UNIT)))
        else:
            result.append(('WARN', '%s is not ordered after %s: after a '
                                   'reboot nova may attach volumes before '
                                   'their cache instance is loaded. Install '
                                   'etc/systemd/nova-compute.service.d/%s '
                                   'as /etc/systemd/system/%s.d/%s and run '
                                   '"systemctl daemon-reload".' % (
                                       unit, OPEN_CAS_UNIT, DROPIN, unit,
                                       DROPIN)))
    return result
