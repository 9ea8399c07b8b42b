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

"""Options of ``os-brick-cas exporter``, group ``[os_brick_cas_exporter]``."""

from oslo_config import cfg

GROUP = 'os_brick_cas_exporter'

exporter_opts = [
    cfg.HostAddressOpt(
        'listen_address',
        default='127.0.0.1',
        help='Address the metrics endpoint listens on. Keep it local (or '
             'on the management network): the metrics name every cached '
             'volume of the host. Prometheus scrapes '
             'http://<listen_address>:<listen_port>/metrics.'),
    cfg.PortOpt(
        'listen_port',
        default=9849,
        help='TCP port of the metrics endpoint.'),
    cfg.BoolOpt(
        'instance_uuids',
        default=True,
        help='Label each cached volume with the uuid of the instance whose '
             'QEMU process has its /dev/casX-Y open (read from /proc; '
             'nova sets the QEMU -uuid to the instance uuid). Turn it off '
             'to skip the /proc scan on hosts with very many processes.'),
    cfg.StrOpt(
        'proc_root',
        default='/proc',
        help='Where the process table is read for instance uuids. Change '
             'it only for tests.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the exporter options on *conf*."""
    conf.register_opts(exporter_opts, group=GROUP)


def list_opts():
    """``(group, options)`` for oslo-config-generator."""
    return [(GROUP, exporter_opts)]


register_opts(cfg.CONF)
