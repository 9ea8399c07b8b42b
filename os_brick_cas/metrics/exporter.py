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

"""Serve the collector over HTTP, or write it for node_exporter."""

import os
import threading
from typing import Optional

from oslo_config import cfg
from oslo_log import log as logging
import prometheus_client

from os_brick_cas.metrics import collector
from os_brick_cas.metrics import eventlog
from os_brick_cas.metrics import opts

LOG = logging.getLogger(__name__)


def build_registry(conf: Optional[cfg.ConfigOpts] = None
                   ) -> prometheus_client.CollectorRegistry:
    """A registry holding only os-brick-cas's metrics."""
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(collector.CasCollector(conf))
    registry.register(eventlog.EventCollector(conf))
    return registry


def scrape(registry: prometheus_client.CollectorRegistry) -> str:
    """The text exposition format, as Prometheus receives it."""
    return prometheus_client.generate_latest(registry).decode('utf-8')


def write_textfile(path: str,
                   registry: prometheus_client.CollectorRegistry) -> None:
    """Write one scrape to *path* atomically (temp file, then rename).

    node_exporter's textfile collector reads only ``*.prom`` files, so the
    temporary file beside *path* is never read half-written.
    """
    prometheus_client.write_to_textfile(path, registry)


def start_http(conf: Optional[cfg.ConfigOpts] = None,
               registry: Optional[prometheus_client.CollectorRegistry] = None,
               ) -> tuple[object, threading.Thread]:
    """Serve ``/metrics`` on ``[os_brick_cas_exporter] listen_address``.

    Over HTTPS when ``tls_cert_file`` is set, requiring a client
    certificate when ``tls_client_ca_file`` is set too. Returns
    ``(server, thread)``; ``server.shutdown()`` stops it.
    """
    conf = conf or cfg.CONF
    group = conf[opts.GROUP]
    registry = registry or build_registry(conf)
    if bool(group.tls_cert_file) != bool(group.tls_key_file):
        raise ValueError('set both [%s] tls_cert_file and tls_key_file, or '
                         'neither' % opts.GROUP)
    if group.tls_client_ca_file and not group.tls_cert_file:
        raise ValueError('[%s] tls_client_ca_file needs tls_cert_file and '
                         'tls_key_file' % opts.GROUP)
    for name in ('tls_cert_file', 'tls_key_file', 'tls_client_ca_file'):
        path = group[name]
        if path and not os.access(path, os.R_OK):
            raise ValueError('cannot read [%s] %s %s' % (opts.GROUP, name,
                                                         path))
    server, thread = prometheus_client.start_http_server(
        group.listen_port, addr=group.listen_address, registry=registry,
        certfile=group.tls_cert_file, keyfile=group.tls_key_file,
        client_cafile=group.tls_client_ca_file,
        client_auth_required=bool(group.tls_client_ca_file))
    LOG.info('os-brick-cas metrics on %s://%s:%d/metrics',
             'https' if group.tls_cert_file else 'http',
             group.listen_address, server.server_port)
    return server, thread
