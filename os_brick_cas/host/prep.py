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

"""Bring the host's cache instances to the layout: plan, apply, check.

The live host is read through casadm (``-L``, ``-P``, ``-G`` per
parameter namespace) and compared with :mod:`os_brick_cas.host.layout_file`.
What differs becomes :class:`Action` objects (start, load, set
parameters, write opencas.conf rows) or a refusal: a device holding Open
CAS metadata is never started over with ``--force``, a running instance
is never re-created, and a mode or line-size change is left to the
operator (it needs a flush and a stop).
"""

import dataclasses
import os
from typing import Callable, Optional

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas.host import layout_file
from os_brick_cas.host import sizing
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import casadm_params as params
from os_brick_cas.opencas import opencas_conf
from os_brick_cas.opencas import releases
from os_brick_cas import opts
from os_brick_cas.privileged import devices as priv_devices

CONF = cfg.CONF
BLOCK = 4096


@dataclasses.dataclass
class Action:
    """One change ``apply`` makes, with the casadm line it runs."""

    cache_id: int
    summary: str
    run: Callable[[casadm_mod.Casadm], object]
    kind: str = 'set'       # 'start', 'load' or 'set' (-X)

    def __str__(self) -> str:
        return 'instance %d: %s' % (self.cache_id, self.summary)


@dataclasses.dataclass
class Drift:
    """A live value that differs from the layout."""

    cache_id: int
    what: str
    live: str
    wanted: str
    core_id: Optional[int] = None

    def __str__(self) -> str:
        where = ('instance %d' % self.cache_id if self.core_id is None else
                 'instance %d core %d' % (self.cache_id, self.core_id))
        return '%s: %s is %s, the layout wants %s' % (
            where, self.what, self.live, self.wanted)


@dataclasses.dataclass
class InstanceState:
    """The layout of one instance next to what the host has."""

    layout: layout_file.InstanceLayout
    running: Optional[casadm_output.CacheInstance]
    size_bytes: Optional[int]
    drifts: list[Drift] = dataclasses.field(default_factory=list)
    actions: list[Action] = dataclasses.field(default_factory=list)
    refusal: Optional[str] = None
    metadata_bytes: Optional[int] = None


@dataclasses.dataclass
class HostState:
    layout: layout_file.HostLayout
    release: Optional[tuple[int, int]]
    cli_version: str
    instances: list[InstanceState]
    unlisted: list[casadm_output.CacheInstance]

    @property
    def refusals(self) -> list[str]:
        return ['instance %d: %s' % (item.layout.cache_id, item.refusal)
                for item in self.instances if item.refusal]

    @property
    def actions(self) -> list[Action]:
        return [action for item in self.instances for action in item.actions]


def _argv(namespace: str, cache_id: int, values: list[tuple[str, object]],
          core_id: Optional[int] = None) -> str:
    line = 'casadm --set-param --name %s --cache-id %d' % (
        namespace, cache_id)
    if core_id is not None:
        line += ' --core-id %d' % core_id
    return line + ''.join(' --%s %s' % item for item in values)


def _matches(param: params.Param, live: Optional[str], wanted: object
             ) -> bool:
    if live is None:
        return False
    if param.choices:
        return live.strip().lower() == str(wanted)
    try:
        return int(live.split()[0]) == wanted
    except (ValueError, IndexError):
        return False


def _read_params(casadm: casadm_mod.Casadm, cache_id: int,
                 namespaces: set[str]) -> dict[str, dict[str, str]]:
    return {namespace: casadm.get_params(namespace, cache_id)
            for namespace in sorted(namespaces)}


def _param_drifts(casadm: casadm_mod.Casadm, item: InstanceState,
                  release: Optional[tuple[int, int]]) -> None:
    """Compare every runtime parameter; add drifts and -X actions."""
    cache = item.running
    cache_id = cache.cache_id
    settings = item.layout.settings(release)
    cache_level = [s for s in settings if not s.param.per_core]
    live = _read_params(casadm, cache_id,
                        {s.param.namespace for s in cache_level})
    changes: dict[str, list[tuple[str, object]]] = {}
    for setting in cache_level:
        param = setting.param
        found = live[param.namespace].get(param.title)
        if not _matches(param, found, setting.value):
            item.drifts.append(Drift(cache_id, '%s %s' % (
                param.namespace, param.option), found or 'unknown',
                str(setting.value)))
            changes.setdefault(param.namespace, []).append(
                (param.option, setting.value))
    per_core = item.layout.core_settings()
    core_changes = False
    for core in cache.cores:
        if not core.active:
            continue
        found = casadm.get_params(params.SEQ_CUTOFF, cache_id, core.core_id)
        for setting in per_core:
            value = found.get(setting.param.title)
            if not _matches(setting.param, value, setting.value):
                item.drifts.append(Drift(
                    cache_id, 'seq-cutoff %s' % setting.param.option,
                    value or 'unknown', str(setting.value), core.core_id))
                core_changes = True
    if core_changes:
        changes[params.SEQ_CUTOFF] = [(s.param.option, s.value)
                                      for s in per_core]
    for namespace, values in _ordered(changes):
        item.actions.append(_set_action(cache_id, namespace, values))


def _ordered(changes: dict[str, list]) -> list[tuple[str, list]]:
    """A policy namespace before its parameters' namespace."""
    order = [params.CLEANING, params.CLEANING_ALRU, params.CLEANING_ACP,
             params.PROMOTION, params.PROMOTION_NHIT, params.SEQ_CUTOFF]
    return [(namespace, changes[namespace]) for namespace in order
            if namespace in changes]


def _set_action(cache_id: int, namespace: str,
                values: list[tuple[str, object]]) -> Action:
    return Action(cache_id, _argv(namespace, cache_id, values),
                  lambda casadm: casadm.set_params(namespace, cache_id,
                                                   values))


def _fresh_settings(item: InstanceState,
                    release: Optional[tuple[int, int]]) -> None:
    """-X calls for an instance about to start (Open CAS defaults skipped).

    Sequential cut-off is per core: it is set once cores exist.
    """
    cache_id = item.layout.cache_id
    changes: dict[str, list[tuple[str, object]]] = {}
    for setting in item.layout.settings(release):
        if setting.param.per_core or setting.value == setting.param.default:
            continue
        changes.setdefault(setting.param.namespace, []).append(
            (setting.param.option, setting.value))
    for namespace, values in _ordered(changes):
        item.actions.append(_set_action(cache_id, namespace, values))


def _line_size_kib(casadm: casadm_mod.Casadm, cache_id: int
                   ) -> Optional[int]:
    stats = casadm.stats(cache_id)
    try:
        return int(float(stats.get('Cache line size [KiB]', '')))
    except ValueError:
        return None


def _not_running(casadm: casadm_mod.Casadm, item: InstanceState,
                 release: Optional[tuple[int, int]],
                 load_existing: bool) -> None:
    layout = item.layout
    metadata = casadm.cache_device_metadata(layout.device)
    if metadata.get('Is cache', '').lower() == 'yes':
        detail = 'clean shutdown: %s, dirty: %s' % (
            metadata.get('Clean Shutdown', '?'),
            metadata.get('Cache dirty', '?'))
        if not load_existing:
            item.refusal = str(exception.CacheDeviceHasMetadata(
                device=layout.device, detail=detail))
            return
        item.actions.append(Action(
            layout.cache_id, 'load the instance on %s (%s): casadm '
            '--start-cache --cache-device %s --load; then compare it with '
            'the layout again' % (layout.device, detail, layout.device),
            lambda casadm: casadm.load_cache(layout.device), kind='load'))
        return
    item.actions.append(Action(
        layout.cache_id, 'start it: casadm --start-cache --cache-device %s '
        '--cache-id %d --cache-mode %s --cache-line-size %d' % (
            layout.device, layout.cache_id, layout.mode.value,
            layout.line_size_kib),
        lambda casadm: casadm.start_cache(layout.device, layout.cache_id,
                                          layout.mode.value,
                                          layout.line_size_kib),
        kind='start'))
    _fresh_settings(item, release)


def _running(casadm: casadm_mod.Casadm, item: InstanceState,
             release: Optional[tuple[int, int]]) -> None:
    layout, cache = item.layout, item.running
    if cache.device not in ('-', layout.device) and not _same(
            cache.device, layout.device):
        item.refusal = ('it runs on %s, the layout names %s; flush and stop '
                        'it (casadm -T -i %d flushes) or fix the layout'
                        % (cache.device, layout.device, cache.cache_id))
        return
    if cache.current_mode != layout.mode.value:
        item.drifts.append(Drift(cache.cache_id, 'cache mode',
                                 cache.current_mode, layout.mode.value))
        item.refusal = (
            'it runs in mode %s, the layout wants %s; os-brick-cas does not '
            'switch modes: the volumes attached there were cached for %s. '
            'Detach them (or drain them), then "casadm --set-cache-mode '
            '--cache-mode %s --cache-id %d --flush-cache yes", or fix the '
            'layout' % (cache.current_mode, layout.mode.value,
                        cache.current_mode, layout.mode.value,
                        cache.cache_id))
        return
    if cache.status not in ('Running',):
        item.refusal = ('its status is %s; only a Running instance is '
                        'reconfigured (os-brick-cas status / doctor say '
                        'why)' % cache.status)
        return
    line = _line_size_kib(casadm, cache.cache_id)
    if line is not None and line != layout.line_size_kib:
        item.drifts.append(Drift(cache.cache_id, 'cache line size',
                                 '%d KiB' % line,
                                 '%d KiB' % layout.line_size_kib))
        item.refusal = ('its cache line size is %d KiB, the layout wants '
                        '%d KiB; the size is fixed when an instance is '
                        'created: flush and stop it (casadm -T -i %d), '
                        'clear its metadata (casadm --zero-metadata -d %s), '
                        'then apply again, or fix the layout' % (
                            line, layout.line_size_kib, cache.cache_id,
                            layout.device))
        return
    _param_drifts(casadm, item, release)


def _same(one: str, other: str) -> bool:
    return os.path.realpath(one) == os.path.realpath(other)


def _size(item: InstanceState, root: str) -> None:
    """The device's size on this host, else the layout's ``size_gib``."""
    size = sizing.block_device_bytes(item.layout.device, root)
    if size is None:
        size = item.layout.size_bytes
    item.size_bytes = size
    if size is not None:
        item.metadata_bytes = sizing.metadata_bytes(size,
                                                    item.layout.line_size_kib)


Release = Optional[tuple[int, int]]


def read_release(casadm: casadm_mod.Casadm) -> tuple[Release, str]:
    """(release line, casadm's version string)."""
    cli = casadm.version().get('CAS CLI Utility', '')
    return releases.major_minor(cli), cli


def survey(casadm: casadm_mod.Casadm, layout: layout_file.HostLayout,
           conf: cfg.ConfigOpts = CONF, load_existing: bool = False
           ) -> HostState:
    """Compare the live host with *layout*; nothing is changed."""
    release, cli = read_release(casadm)
    caches = {cache.cache_id: cache for cache in casadm.list_caches()}
    by_device = {cache.device: cache for cache in caches.values()}
    root = conf[opts.GROUP].host_root
    result = []
    for layout_instance in layout.instances:
        item = InstanceState(layout_instance,
                             caches.get(layout_instance.cache_id), None)
        _size(item, root)
        try:
            layout_instance.settings(release)
        except exception.HostLayoutRefused as exc:
            item.refusal = str(exc)
            result.append(item)
            continue
        other = by_device.get(layout_instance.device)
        if other is not None and other.cache_id != layout_instance.cache_id:
            item.refusal = ('%s already runs as cache instance %d; fix the '
                            'layout' % (layout_instance.device,
                                        other.cache_id))
        elif item.running is None:
            _not_running(casadm, item, release, load_existing)
        else:
            _running(casadm, item, release)
        result.append(item)
    unlisted = [cache for cache_id, cache in sorted(caches.items())
                if layout.find(cache_id) is None]
    return HostState(layout, release, cli, result, unlisted)


def layout_only(layout: layout_file.HostLayout,
                conf: cfg.ConfigOpts = CONF) -> HostState:
    """*layout* sized without casadm (before Open CAS is installed).

    No instance runs, no action is planned: only sizes and RAM are known.
    """
    items = []
    for layout_instance in layout.instances:
        item = InstanceState(layout_instance, None, None)
        _size(item, conf[opts.GROUP].host_root)
        items.append(item)
    return HostState(layout, None, '', items, [])


def cache_rows(layout: layout_file.HostLayout
               ) -> list[opencas_conf.CacheRow]:
    """The ``[caches]`` rows the layout asks for (casctl's own fields)."""
    rows = []
    for instance in layout.instances:
        extra = [('cache_line_size', str(instance.line_size_kib)),
                 ('cleaning_policy', instance.policy(params.CLEANING)),
                 ('promotion_policy', instance.policy(params.PROMOTION))]
        if instance.lazy_startup:
            extra.append(('lazy_startup', 'true'))
        rows.append(opencas_conf.CacheRow(instance.cache_id, instance.device,
                                          instance.mode.value, tuple(extra)))
    return rows


def conf_would_change(layout: layout_file.HostLayout, path: str
                      ) -> Optional[bool]:
    """Whether ``apply`` would rewrite opencas.conf (None: unreadable)."""
    try:
        with open(path) as conf_file:
            text = conf_file.read()
    except FileNotFoundError:
        text = ''
    except OSError:
        return None
    return opencas_conf.rewrite_caches(text, cache_rows(layout)) != text


def write_conf(layout: layout_file.HostLayout) -> bool:
    """Write the layout's ``[caches]`` rows (privileged); True if changed."""
    return priv_devices.record_caches(
        [[row.cache_id, row.device, row.mode, [list(e) for e in row.extra]]
         for row in cache_rows(layout)])


def ram_needed(state: HostState, only_new: bool = False) -> int:
    """Metadata RAM of the layout's instances (not running ones only)."""
    return sum(item.metadata_bytes or 0 for item in state.instances
               if not only_new or item.running is None)
