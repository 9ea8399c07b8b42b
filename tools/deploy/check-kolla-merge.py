#!/usr/bin/env python3
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

"""Check kolla-ansible's merge of deploy/kolla/config.

Reads what tools/deploy/kolla-merge-configs.yml wrote (merges.json and,
per service, kolla's rendered file SERVICE.base.conf and the merged
SERVICE.merged.conf)
and fails unless, for each service:

- its source list is the one of kolla's role (the merge_configs task of
  the role's tasks/config.yml writing that file, for that service);
- every option of kolla's file is in the merged file, with kolla's value
  unless one of our files sets it (nothing of kolla's is lost);
- every option our files set is there with our value (the last file's in
  kolla's order: a later file replaces a whole option, repeated keys
  included);
- each section our files set outside [os_brick_cas*] is one kolla's file
  has (a misnamed backend section would be a new one nothing reads);
- each option in an [os_brick_cas*] section is one the product registers
  (its oslo.config.opts entry points) and its value parses with that
  option's type; for nova-compute, the same for the options our files set
  in nova's own sections (nova's ``nova.conf`` entry point).

    check-kolla-merge.py MERGES_JSON
"""

import importlib.metadata
import json
import os
import sys

from oslo_config import cfg
import yaml

#: the product's option namespaces (setup.cfg, oslo.config.opts)
PRODUCT_NAMESPACES = ('os_brick_cas', 'os_brick_cas.nova')
#: the services whose own options are checked too (cinder's opts module
#: needs cinder's optional backup drivers' libraries, so not cinder)
SERVICE_NAMESPACES = {'nova-compute': ('nova.conf',)}
PRODUCT_SECTION_PREFIX = 'os_brick_cas'

Sections = dict[str, dict[str, list[str]]]


def parse(path: str) -> Sections:
    """Sections of an ini file as oslo.config reads it (repeats kept)."""
    sections: Sections = {}
    cfg.ConfigParser(path, sections).parse()
    return sections


def registered_opts(namespaces) -> dict[str, dict[str, cfg.Opt]]:
    """Options by group name ('DEFAULT' for None) of oslo.config namespaces."""
    points = importlib.metadata.entry_points(group='oslo.config.opts')
    opts: dict[str, dict[str, cfg.Opt]] = {}
    for namespace in namespaces:
        for point in points.select(name=namespace):
            for group, group_opts in point.load()():
                name = getattr(group, 'name', group) or 'DEFAULT'
                for opt in group_opts:
                    opts.setdefault(name, {})[opt.dest] = opt
    return opts


def kolla_sources(manifest: dict, merge: dict) -> list[str]:
    """The sources kolla's role merges for the service of *merge*.

    From the merge_configs task of the role's tasks/config.yml whose first
    source is the same template as ours, with the role's variables
    (role_path, node_custom_config, item.key, inventory_hostname) put in.
    """
    role_dir = os.path.join(manifest['kolla_ansible_dir'], 'roles',
                            merge['role'])
    with open(os.path.join(role_dir, 'tasks', 'config.yml')) as handle:
        tasks = yaml.safe_load(handle)
    template = os.path.basename(merge['sources'][0])
    values = {'role_path': role_dir,
              'node_custom_config': manifest['node_custom_config'],
              'item.key': merge['service_name'],
              'inventory_hostname': manifest['inventory_hostname']}
    for task in tasks:
        sources = (task.get('merge_configs') or {}).get('sources') or []
        if sources and sources[0].endswith('/templates/' + template):
            resolved = []
            for source in sources:
                for name, value in values.items():
                    source = source.replace('{{ %s }}' % name, value)
                resolved.append(source)
            return resolved
    return []


def check_merge(base: Sections, ours: list[Sections],
                merged: Sections) -> list[str]:
    """What kolla's merge lost or got wrong, as messages."""
    errors = []
    expected = {section: dict(options) for section, options in base.items()}
    for override in ours:
        for section, options in override.items():
            if (section not in base and
                    not section.startswith(PRODUCT_SECTION_PREFIX)):
                errors.append('[%s] is not a section of kolla\'s file'
                              % section)
            expected.setdefault(section, {}).update(options)
    for section, options in expected.items():
        for key, values in options.items():
            got = merged.get(section, {}).get(key)
            if got != values:
                errors.append('[%s] %s: %r after the merge, expected %r'
                              % (section, key, got, values))
    return errors


def check_options(ours: list[Sections], merged_path: str,
                  namespaces) -> list[str]:
    """Unknown option names and unparsable values of our files, as messages.

    Every option in an [os_brick_cas*] section is checked; in other
    sections, those of a group the given namespaces register.
    """
    opts = registered_opts(PRODUCT_NAMESPACES + tuple(namespaces))
    errors = []
    checked = []
    for override in ours:
        for section, options in override.items():
            if (section not in opts and
                    not section.startswith(PRODUCT_SECTION_PREFIX)):
                continue
            for key in options:
                if key in opts.get(section, {}):
                    checked.append((section, opts[section][key]))
                else:
                    errors.append('[%s] %s is not a registered option'
                                  % (section, key))
    # only the options our files set: others may be required ones
    conf = cfg.ConfigOpts()
    for section, opt in checked:
        conf.register_opt(opt, group=None if section == 'DEFAULT' else section)
    conf(args=[], default_config_files=[merged_path])
    for section, opt in checked:
        try:
            conf[opt.dest] if section == 'DEFAULT' else conf[section][opt.dest]
        except cfg.ConfigFileValueError as exc:
            errors.append('[%s] %s: %s' % (section, opt.dest, exc))
    return errors


def check_service(work: str, manifest: dict, merge: dict) -> list[str]:
    """Check one service's merge; messages name the service."""
    service = merge['service_name']
    kolla = kolla_sources(manifest, merge)
    if merge['sources'] != kolla:
        return ['%s: merged %s, kolla-ansible\'s role merges %s'
                % (service, merge['sources'], kolla)]
    # merge_configs reads the sources that exist, in their order
    ours = [parse(path) for path in merge['sources'][1:]
            if os.access(path, os.R_OK)]
    if not ours:
        return ['%s: none of our files is among its sources' % service]
    merged_path = os.path.join(work, service + '.merged.conf')
    base = parse(os.path.join(work, service + '.base.conf'))
    if not base.get('DEFAULT'):
        return ['%s: kolla\'s file rendered without [DEFAULT]' % service]
    merged = parse(merged_path)
    errors = check_merge(base, ours, merged)
    errors += check_options(ours, merged_path,
                            SERVICE_NAMESPACES.get(service, ()))
    return ['%s: %s' % (service, error) for error in errors]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        manifest = json.load(handle)
    merges = manifest['merges']
    work = os.path.dirname(argv[1])
    errors = []
    for merge in merges:
        errors += check_service(work, manifest, merge)
    for error in errors:
        print('FAIL: kolla merge_configs: %s' % error, file=sys.stderr)
    if not errors:
        print('kolla-ansible merge_configs: %s merge as intended'
              % ', '.join(merge['service_name'] for merge in merges))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
