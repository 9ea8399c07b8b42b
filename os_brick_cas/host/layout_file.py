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

"""The declarative host layout: which cache instances this host runs, how.

A small YAML file (``[os_brick_cas] host_layout``) lists the cache
instances with their device, mode, cache line size, cleaning, promotion and
sequential cut-off parameters. :func:`load` validates every field and
reports each bad one; :meth:`InstanceLayout.settings` fills what the file
leaves out with the per-mode defaults below (reasons and sources in the
admin guide, "Tuning"). Nothing here runs casadm.
"""

import dataclasses
from typing import Any, Optional

import yaml

from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas.opencas import casadm_params as params
from os_brick_cas import validation

P = params
#: casadm takes these cache devices without a by-id link (cas_lib.c,
#: set_device_path); handy for RAM-disk CI hosts.
_WHITELISTED = ('/dev/ram', '/dev/nullb', '/dev/drbd')
SECTIONS = (P.CLEANING, P.PROMOTION, P.SEQ_CUTOFF)
#: the layout file's key of each section
SECTION_KEYS = {P.CLEANING: 'cleaning', P.PROMOTION: 'promotion',
                P.SEQ_CUTOFF: 'seq_cutoff'}
INSTANCE_KEYS = ('id', 'mode', 'device', 'line_size_kib', 'cleaning',
                 'promotion', 'seq_cutoff', 'flush_rate_mib_s',
                 'lazy_startup', 'size_gib')
TOP_KEYS = ('version', 'flush_rate_mib_s', 'instances')

#: per-mode defaults; a section whose policy differs from the default's
#: gets Open CAS's own defaults for that policy's parameters instead.
#: Each one is measured against a stack that undoes it in the peers run
#: (benchmarks/peers.py, peers_data.DEFAULT_VARIANTS; the figures in
#: doc/source/admin/tuning.rst, "Measured against its peers"); the row
#: that justifies it is named below.
#: seq cut-off always/64 KiB: cas-wb against cas-wb-noseq (the fixed
#: range kept after a scan)
_SEQ_CUTOFF = {'policy': 'always', 'threshold_kib': 64}
DIRTY_DEFAULTS = {
    # alru: cas-wb against cas-wb-acp (write and read latency, also while
    # cleaning); wake-up, staleness, activity threshold and dirty-ratio
    # trigger: against cas-wb-ocf (Open CAS's own values: dirty data left,
    # drain); flush_max_buffers 100: against cas-wb-fmb1000 (QD1 write);
    # the inertia is Open CAS's own 128 MiB, not measured: below 640 MiB
    # of cache (the run's is 64) it keeps the trigger on (tuning.rst)
    P.CLEANING: {'policy': 'alru', 'wake_up_s': 5, 'staleness_s': 30,
                 'flush_max_buffers': 100, 'activity_threshold_ms': 1000,
                 'dirty_ratio_threshold_pct': 20,
                 'dirty_ratio_inertia_mib': 128},
    # always: a write-back instance absorbs every write (design; nhit's
    # trigger is an occupancy the run's cases do not reach)
    P.PROMOTION: {'policy': 'always'},
    P.SEQ_CUTOFF: _SEQ_CUTOFF,
}
CLEAN_DEFAULTS = {
    P.CLEANING: {'policy': 'alru'},
    # nhit: cas-wt against cas-wt-always
    P.PROMOTION: {'policy': 'nhit', 'threshold': 3, 'trigger_pct': 80},
    P.SEQ_CUTOFF: _SEQ_CUTOFF,
}
#: 4 KiB: cas-wb against cas-wb-64k (zipf working set larger than the
#: cache); the RAM it costs in tuning.rst, "Sizing"
DEFAULT_LINE_SIZE_KIB = 4


def mode_defaults(mode: modes.CacheMode) -> dict[str, dict[str, Any]]:
    return DIRTY_DEFAULTS if mode.holds_dirty_data else CLEAN_DEFAULTS


@dataclasses.dataclass(frozen=True)
class Setting:
    """One runtime parameter an instance should have."""

    param: params.Param
    value: Any
    explicit: bool      # written in the layout (not a default)


@dataclasses.dataclass(frozen=True)
class InstanceLayout:
    """One cache instance as the layout describes it."""

    cache_id: int
    mode: modes.CacheMode
    device: str
    line_size_kib: int
    sections: dict[str, dict[str, Any]]  # as written: namespace -> fields
    flush_rate_mib_s: Optional[float] = None
    lazy_startup: bool = False
    #: the device's size as written in the layout (``size_gib``), for
    #: ``host plan`` on a host whose device is not there yet
    size_bytes: Optional[int] = None

    def policy(self, section: str) -> str:
        written = self.sections.get(section, {})
        return written.get('policy',
                           mode_defaults(self.mode)[section]['policy'])

    def settings(self, release: Optional[tuple[int, int]]
                 ) -> list[Setting]:
        """Every parameter to set, defaults filled in, for *release*.

        A parameter the release does not know is left out when it is a
        default and refused (HostLayoutRefused) when the layout asks for
        it.
        """
        return [setting for section in SECTIONS
                for setting in self._section_settings(section, release)]

    def core_settings(self) -> list[Setting]:
        """The per-core parameters (sequential cut-off) every core gets.

        Open CAS gives each core it adds its own defaults; these are what
        the layout wants instead. No release gates them.
        """
        return self._section_settings(P.SEQ_CUTOFF, None)

    def _section_settings(self, section: str,
                          release: Optional[tuple[int, int]]
                          ) -> list[Setting]:
        result = []
        written = self.sections.get(section, {})
        policy = self.policy(section)
        defaults = mode_defaults(self.mode)[section]
        use_defaults = defaults.get('policy') == policy
        namespaces = [section, params.namespace_of_policy(section, policy)]
        for namespace in filter(None, namespaces):
            for param in params.of_namespace(namespace):
                explicit = param.field in written
                if explicit:
                    value = written[param.field]
                elif use_defaults and param.field in defaults:
                    value = defaults[param.field]
                else:
                    value = param.default
                if not params.supported(param, release):
                    if explicit:
                        raise exception.HostLayoutRefused(
                            cache_id=self.cache_id,
                            reason='%s.%s needs Open CAS v%d.%02d or newer '
                                   '(casadm --%s); this host runs %s. '
                                   'Remove it from the layout or upgrade '
                                   'Open CAS.' % (
                                       SECTION_KEYS[section], param.field,
                                       param.since[0], param.since[1],
                                       param.option,
                                       _release_label(release)))
                    continue
                result.append(Setting(param, value, explicit))
        return result

    def dirty_ratio_pct(self, release: Optional[tuple[int, int]]
                        ) -> Optional[int]:
        """The dirty-ratio trigger in force, or None (no cap)."""
        if not self.mode.holds_dirty_data or self.policy(P.CLEANING) != 'alru':
            return None
        for setting in self.settings(release):
            if setting.param.field == 'dirty_ratio_threshold_pct':
                return None if setting.value >= 100 else setting.value
        return None


def _release_label(release: Optional[tuple[int, int]]) -> str:
    return 'an unknown release' if release is None else 'v%d.%02d' % release


@dataclasses.dataclass(frozen=True)
class HostLayout:
    """All cache instances of one host."""

    path: str
    instances: tuple[InstanceLayout, ...]
    flush_rate_mib_s: Optional[float] = None

    def find(self, cache_id: int) -> Optional[InstanceLayout]:
        for instance in self.instances:
            if instance.cache_id == cache_id:
                return instance
        return None

    def flush_rate(self, instance: InstanceLayout) -> Optional[float]:
        """MiB/s the instance flushes at, as recorded in the layout."""
        return instance.flush_rate_mib_s or self.flush_rate_mib_s


class _Problems(object):
    """Collects one message per bad field."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append('- %s: %s' % (where, message))

    def unknown(self, where: str, found: dict, allowed: tuple) -> None:
        for key in sorted(set(found) - set(allowed), key=str):
            self.add('%s.%s' % (where, key) if where else str(key),
                     'unknown field (known: %s)' % ', '.join(allowed))


def _int_in(problems: _Problems, where: str, value: Any, low: int,
            high: Optional[int]) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(where, 'must be an integer, not %r' % (value,))
        return None
    if value < low or (high is not None and value > high):
        problems.add(where, 'must be between %d and %s, not %d' % (
            low, high if high is not None else 'any', value))
        return None
    return value


def _rate(problems: _Problems, where: str, value: Any) -> Optional[float]:
    return _positive(problems, where, value, 'MiB/s')


def _positive(problems: _Problems, where: str, value: Any,
              unit: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            value <= 0):
        problems.add(where, 'must be a positive number of %s, not %r'
                     % (unit, value))
        return None
    return float(value)


def _section(problems: _Problems, where: str, section: str,
             found: Any, default_policy: str) -> dict[str, Any]:
    if found is None:
        return {}
    if not isinstance(found, dict):
        problems.add(where, 'must be a mapping')
        return {}
    policy = found.get('policy')
    choices = params.find(section, 'policy').choices
    if policy is not None and policy not in choices:
        problems.add(where + '.policy', 'must be one of %s, not %r' % (
            ', '.join(choices), policy))
        return {}
    namespace = (section if section == P.SEQ_CUTOFF else
                 params.namespace_of_policy(section,
                                            policy or default_policy))
    allowed = ('policy',) + tuple(
        p.field for p in params.of_namespace(namespace or '')
        if p.field != 'policy')
    if set(found) - set(allowed):
        for key in sorted(set(found) - set(allowed), key=str):
            problems.add('%s.%s' % (where, key),
                         'not a parameter of %s policy %s (it takes: %s)'
                         % (section, policy or default_policy,
                            ', '.join(allowed)))
    result = {'policy': policy} if policy is not None else {}
    for param in params.of_namespace(namespace or ''):
        if param.field == 'policy' or param.field not in found:
            continue
        value = _int_in(problems, '%s.%s' % (where, param.field),
                        found[param.field], param.low, param.high)
        if value is not None:
            result[param.field] = value
    return result


def _device(problems: _Problems, where: str, value: Any) -> Optional[str]:
    try:
        path = validation.dev_path(value)
    except exception.InvalidInput:
        problems.add(where, 'must be an absolute /dev path, not %r' % (value,))
        return None
    if path.startswith(_WHITELISTED) or (
            path.startswith(validation.BY_ID_DIR + '/') and
            path.count('/') == 4):
        return path
    problems.add(where, 'casadm takes a cache device only by its %s link '
                        '(a whole disk or a -partN link), or /dev/ramN, '
                        '/dev/nullbN, /dev/drbdN: not %s' % (
                            validation.BY_ID_DIR, path))
    return None


def _instance(problems: _Problems, where: str, found: Any
              ) -> Optional[InstanceLayout]:
    if not isinstance(found, dict):
        problems.add(where, 'must be a mapping with id, mode and device')
        return None
    problems.unknown(where, found, INSTANCE_KEYS)
    for key in ('id', 'mode', 'device'):
        if key not in found:
            problems.add('%s.%s' % (where, key), 'missing (required)')
    cache_id = (_int_in(problems, where + '.id', found['id'], 1,
                        validation.MAX_CACHE_ID) if 'id' in found else None)
    mode = None
    if 'mode' in found:
        try:
            mode = validation.cache_mode(found['mode'])
        except exception.InvalidInput:
            problems.add(where + '.mode', 'must be one of %s, not %r' % (
                ', '.join(modes.ALL_MODES), found['mode']))
    device = (_device(problems, where + '.device', found['device'])
              if 'device' in found else None)
    line = found.get('line_size_kib', DEFAULT_LINE_SIZE_KIB)
    if line not in P.LINE_SIZES_KIB or isinstance(line, bool):
        problems.add(where + '.line_size_kib', 'must be one of %s, not %r' % (
            ', '.join(map(str, P.LINE_SIZES_KIB)), line))
    lazy = found.get('lazy_startup', False)
    if not isinstance(lazy, bool):
        problems.add(where + '.lazy_startup', 'must be true or false')
    defaults = mode_defaults(mode or modes.CacheMode.WRITE_THROUGH)
    sections = {section: _section(
        problems, '%s.%s' % (where, SECTION_KEYS[section]), section,
        found.get(SECTION_KEYS[section]), defaults[section]['policy'])
        for section in SECTIONS}
    rate = _rate(problems, where + '.flush_rate_mib_s',
                 found.get('flush_rate_mib_s'))
    size_gib = _positive(problems, where + '.size_gib',
                         found.get('size_gib'), 'GiB')
    if None in (cache_id, mode, device):
        return None
    return InstanceLayout(cache_id=cache_id, mode=mode, device=device,
                          line_size_kib=line, sections=sections,
                          flush_rate_mib_s=rate, lazy_startup=lazy is True,
                          size_bytes=None if size_gib is None else
                          int(size_gib * 2 ** 30))


def parse(text: str, path: str = '<layout>') -> HostLayout:
    """Validate the YAML *text*; HostLayoutInvalid lists each bad field."""
    problems = _Problems()
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise exception.HostLayoutInvalid(path=path,
                                          problems='- not YAML: %s' % exc)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise exception.HostLayoutInvalid(
            path=path, problems='- the document must be a mapping with '
                                '"instances"')
    problems.unknown('', document, TOP_KEYS)
    if document.get('version', 1) != 1:
        problems.add('version', 'only version 1 is known')
    found = document.get('instances')
    if not isinstance(found, list) or not found:
        problems.add('instances', 'must be a non-empty list')
        found = []
    instances = [_instance(problems, 'instances[%d]' % index, item)
                 for index, item in enumerate(found)]
    _unique(problems, instances)
    rate = _rate(problems, 'flush_rate_mib_s',
                 document.get('flush_rate_mib_s'))
    if problems.items:
        raise exception.HostLayoutInvalid(path=path,
                                          problems='\n'.join(problems.items))
    return HostLayout(path=path, instances=tuple(instances),
                      flush_rate_mib_s=rate)


def _unique(problems: _Problems,
            instances: list[Optional[InstanceLayout]]) -> None:
    seen_ids: dict[int, int] = {}
    seen_devices: dict[str, int] = {}
    for index, instance in enumerate(instances):
        if instance is None:
            continue
        where = 'instances[%d]' % index
        if instance.cache_id in seen_ids:
            problems.add(where + '.id', 'cache id %d is also used by '
                         'instances[%d]' % (instance.cache_id,
                                            seen_ids[instance.cache_id]))
        if instance.device in seen_devices:
            problems.add(where + '.device', '%s is also used by '
                         'instances[%d] (one instance per device or '
                         'partition)' % (instance.device,
                                         seen_devices[instance.device]))
        seen_ids.setdefault(instance.cache_id, index)
        seen_devices.setdefault(instance.device, index)


def load(path: str) -> HostLayout:
    """Read and validate the layout file at *path*."""
    try:
        with open(path) as layout_file:
            text = layout_file.read()
    except OSError as exc:
        raise exception.HostLayoutInvalid(
            path=path, problems='- cannot read it: %s (set [os_brick_cas] '
                                'host_layout, see etc/host-layout.yaml.'
                                'sample)' % exc)
    return parse(text, path)
