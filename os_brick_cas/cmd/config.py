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

"""Where the CLI finds nova's configuration, and this host's nova name.

``[os_brick_cas]`` lives in the nova.conf of nova-compute, which is in a
different place on each deployment: ``/etc/nova/nova.conf(.d)`` (packages,
devstack), ``/etc/kolla/nova-compute/nova.conf`` on a kolla host (outside
the container). Without ``--config-file`` the CLI reads, in this order
(later files win): oslo.config's default files of project nova, kolla's
nova.conf, oslo.config's default files of os-brick-cas, then the file named
by ``$OS_BRICK_CAS_CONFIG``.
"""

import glob
import os
import socket
from typing import Optional

from oslo_config import cfg

#: where this host's file system starts; tests point it at a fake layout
ROOT = '/'
#: a file read last when set (e.g. in a container with nova.conf elsewhere)
ENV = 'OS_BRICK_CAS_CONFIG'
#: nova.conf of a kolla-ansible compute host, as seen from the host
KOLLA_NOVA_CONF = 'etc/kolla/nova-compute/nova.conf'
#: what ``--host`` shows as its default: never the build machine's name
HOST_PLACEHOLDER = "<this host's nova name>"


def _rooted(path: str) -> str:
    return os.path.join(ROOT, path.lstrip('/'))


def _oslo_defaults(project: str) -> tuple[list[str], list[str]]:
    """oslo.config's default files and dirs of *project* under ROOT."""
    if ROOT == '/':
        return (cfg.find_config_files(project=project, prog=project),
                cfg.find_config_dirs(project=project, prog=project))
    # a fake layout: oslo.config's /etc search, re-rooted
    files = [_rooted(path) for path in ('etc/%s/%s.conf' % (project, project),
                                        'etc/%s.conf' % project)]
    dirs = [_rooted(path) for path in (
        'etc/%s/%s.conf.d' % (project, project), 'etc/%s.conf.d' % project)]
    return ([path for path in files if os.path.isfile(path)][:1],
            [path for path in dirs if os.path.isdir(path)][:1])


def default_config() -> tuple[list[str], list[str]]:
    """``(files, dirs)`` to read when no ``--config-file`` is given."""
    nova_files, nova_dirs = _oslo_defaults('nova')
    kolla = _rooted(KOLLA_NOVA_CONF)
    nova_files += [kolla] if os.path.isfile(kolla) else []
    own_files, own_dirs = _oslo_defaults('os-brick-cas')
    files = nova_files + own_files
    explicit = os.environ.get(ENV)
    if explicit:
        files.append(explicit)   # missing: oslo.config says so, one line
    return _unique(files), _unique(nova_dirs + own_dirs)


def _unique(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def files_read(conf: cfg.ConfigOpts = cfg.CONF) -> list[str]:
    """The configuration files *conf* was loaded from, in reading order."""
    if 'config_file' not in conf:
        return []
    dirs = conf.config_dir or []
    if isinstance(dirs, str):
        dirs = [dirs]
    found = list(conf.config_file or [])
    for directory in dirs:
        found += sorted(glob.glob(os.path.join(directory, '*.conf')))
    return found


def nova_host(conf: cfg.ConfigOpts = cfg.CONF) -> str:
    """This host's name as nova knows it: the one for ownership verdicts.

    nova-compute names itself by ``[DEFAULT] host`` and, when that is not
    set, by ``socket.gethostname()`` (nova.conf.netconf); Cinder's fence
    markers carry that name. Read from the files *conf* was loaded from
    (or nova's own option when nova registered it in this process).
    """
    if 'host' in conf:
        return conf.host
    return _host_in(files_read(conf)) or socket.gethostname()


def _host_in(files: list[str]) -> Optional[str]:
    if not files:
        return None
    private = cfg.ConfigOpts()
    private.register_opt(cfg.StrOpt('host'))
    private([], project='nova', default_config_files=files,
            default_config_dirs=[], use_env=False)
    return private.host or None
