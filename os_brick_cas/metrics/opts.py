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
        help='Address the metrics endpoint listens on. The default serves '
             'only this host (a Prometheus or reverse proxy on the host); '
             'for a Prometheus elsewhere set this host\'s management-network '
             'address and scrape http://<listen_address>:<listen_port>/'
             'metrics. The metrics name every cached volume of the host: '
             'never listen on a public network.'),
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
        'qemu_user',
        default='libvirt-qemu',
        help='User the QEMU processes of libvirt run as (Debian/Ubuntu: '
             'libvirt-qemu; RHEL: qemu). Only a process of this user in the '
             'host\'s mount namespace may name the instance using a cached '
             'device; any other process holding /dev/casX-Y is ignored.'),
    cfg.IntOpt(
        'casadm_timeout',
        default=5,
        min=1,
        help='Seconds each casadm call of a scrape may take before it is '
             'killed. Keep it well under the Prometheus scrape_timeout '
             '(10 s by default): a hung casadm then gives a prompt scrape '
             'with os_brick_cas_up 0 instead of a scrape that times out. '
             'After one call of a collection times out, the rest of that '
             'collection is skipped.'),
    cfg.FloatOpt(
        'cache_seconds',
        default=5.0,
        min=0,
        help='Seconds a collection is reused by later scrapes. Only one '
             'collection runs at a time; scrapes arriving meanwhile wait '
             'for it and share its result, so parallel scrapes never start '
             'parallel casadm calls.'),
    cfg.StrOpt(
        'tls_cert_file',
        help='PEM certificate chain: serve /metrics over HTTPS (with '
             'tls_key_file). Unset: plain HTTP.'),
    cfg.StrOpt(
        'tls_key_file',
        help='PEM private key of tls_cert_file.'),
    cfg.StrOpt(
        'tls_client_ca_file',
        help='PEM CA bundle: require a client certificate signed by it '
             '(mutual TLS; needs tls_cert_file). For basic auth put a '
             'reverse proxy in front of a local listen_address.'),
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
