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

"""doctor's check of the cache shares: the loaded IO-class tables."""

from typing import Iterator

from os_brick_cas.cmd.checks import Finding
from os_brick_cas.cmd.checks import Host
from os_brick_cas.cmd.checks import OK
from os_brick_cas.cmd.checks import register
from os_brick_cas.cmd.checks import WARN
from os_brick_cas import exception
from os_brick_cas import labels
from os_brick_cas.opencas import casadm_output
from os_brick_cas import report
from os_brick_cas import share_usage

#: the repair, as doctor prints it
RELOAD = 'os-brick-cas reload-io-classes --cache-id %d'


def _table_text(table: list[casadm_output.IoClass]) -> str:
    return ', '.join('%d:%s:%g' % (c.class_id, c.name, c.allocation)
                     for c in table)


@register('shares')
def shares(host: Host) -> Iterator[Finding]:
    """Each instance's IO-class table is what its volumes' shares give."""
    held = 0
    problems = 0
    for cache in host.caches():
        if not cache.cores:
            continue
        try:
            found = share_usage.instance_shares(
                host.casadm, cache, host.casadm.stats(cache.cache_id))
        except exception.CasError as exc:
            problems += 1
            yield Finding(WARN, 'cache instance %d: its IO-class table or '
                          'statistics could not be read (%s): its shares '
                          'were not checked' % (cache.cache_id, exc),
                          cache_id=cache.cache_id)
            continue
        held += sum(1 for core in found.cores.values()
                    if core.held is not None)
        if found.table_differs:
            problems += 1
            yield Finding(WARN, 'cache instance %d: its IO-class table is '
                          'not what its volumes\' cache shares and drains '
                          'give (loaded: %s; expected: %s). Run "%s" (drains '
                          'stay as they are).' % (
                              cache.cache_id, _table_text(found.table),
                              _table_text(found.expected.table),
                              RELOAD % cache.cache_id),
                          cache_id=cache.cache_id)
        devices = {core.core_id: core.device for core in cache.cores}
        for core_id in found.expected.unshared:
            problems += 1
            _image, volume_id = report.rbd_image_of(devices[core_id])
            yield Finding(WARN, 'volume %s (%s) asked for a %d%% cache share '
                          'and gets none: instance %d has no IO class id or '
                          'percent left (32 classes; the shares sum to at '
                          'most 100%%; the newest shares lose theirs '
                          'first). It is cached uncapped in class 0. Detach '
                          'a volume with a share (or give it a smaller '
                          'one), then run "%s".' % (
                              volume_id or devices[core_id],
                              labels.core(cache.cache_id, core_id),
                              found.cores[core_id].asked, cache.cache_id,
                              RELOAD % cache.cache_id),
                          volume_id=volume_id, cache_id=cache.cache_id,
                          core_id=core_id)
    if problems:
        return
    yield Finding(OK, 'cache shares: %d volume(s) hold their share; the '
                  'loaded IO-class tables were compared with them' % held)
