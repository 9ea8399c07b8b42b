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

"""Which cache instance serves a requested mode, and which fallback is safe.

The cache mode belongs to an Open CAS cache instance, not to a core, so a
host offering several modes runs one instance per mode; the operator maps
mode -> instance id in ``[os_brick_cas] cache_instances``. What casadm
reports must agree with that map. Fallback only ever goes towards modes
that hold no dirty data, or to no cache at all, and only if configured.
"""

import dataclasses
from typing import Optional

from oslo_config import cfg


from os_brick_cas import exception
from os_brick_cas import modes
from os_brick_cas.opencas import casadm_output
from os_brick_cas.opencas import known_defects
from os_brick_cas import opts
from os_brick_cas import validation

#: Instance states in which a core can be added or re-activated.
_USABLE = ('Running', 'Incomplete')


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a volume goes.

    ``cache_id`` is None when the fallback policy allows an uncached attach.
    """

    requested: modes.CacheMode
    mode: Optional[modes.CacheMode]
    cache_id: Optional[int]

    @property
    def cached(self) -> bool:
        return self.cache_id is not None

    @property
    def fell_back(self) -> bool:
        return self.mode != self.requested


def _usable(status: str) -> bool:
    return status in _USABLE or status.startswith('Flushing')


class CachePolicy(object):
    """Mode -> cache instance selection for one host."""

    def __init__(self, instance_map: dict[str, str],
                 fallback_policy: str = opts.FALLBACK_FAIL,
                 unsafe_modes: Optional[dict[modes.CacheMode,
                                             exception.CasError]] = None):
        self.instances = self._parse_map(instance_map)
        self.fallback_policy = fallback_policy
        #: modes the loaded Open CAS release can lose writes of, and why
        self.unsafe_modes = unsafe_modes or {}

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts = cfg.CONF) -> 'CachePolicy':
        group = conf[opts.GROUP]
        policy = cls(group.cache_instances, group.fallback_policy)
        version = known_defects.loaded_version(conf)
        for mode in policy.instances:
            for defect in known_defects.unaccepted(mode, version, conf):
                policy.unsafe_modes[mode] = exception.OpenCasDataLossDefect(
                    version=version, mode=mode.value, defect=defect.key,
                    summary=defect.summary)
        return policy

    @staticmethod
    def _parse_map(instance_map: dict[str, str]) -> dict[modes.CacheMode,
                                                         int]:
        parsed: dict[modes.CacheMode, int] = {}
        for mode_name, raw_id in instance_map.items():
            mode = validation.cache_mode(mode_name.strip())
            try:
                cache_id = validation.cache_id(int(str(raw_id).strip()))
            except ValueError:
                raise exception.InvalidInput(
                    what='[os_brick_cas] cache_instances entry',
                    value='%s:%s' % (mode_name, raw_id),
                    reason='the cache id must be an integer 1-16384')
            if cache_id in parsed.values():
                raise exception.InvalidInput(
                    what='[os_brick_cas] cache_instances', value=instance_map,
                    reason='cache instance %d is mapped to two modes; a '
                           'cache instance has exactly one mode' % cache_id)
            parsed[mode] = cache_id
        return parsed

    @property
    def offered_modes(self) -> list[modes.CacheMode]:
        return list(self.instances)

    def problems(self, caches: list[casadm_output.CacheInstance]
                 ) -> dict[modes.CacheMode, exception.CasError]:
        """Why each configured mode is unusable (empty if all are fine)."""
        found = {}
        for mode in self.instances:
            try:
                self._check_instance(mode, caches)
            except exception.CasError as exc:
                found[mode] = exc
        return found

    def _check_instance(self, mode: modes.CacheMode,
                        caches: list[casadm_output.CacheInstance]) -> int:
        cache_id = self.instances[mode]
        if mode in self.unsafe_modes:
            raise self.unsafe_modes[mode]
        by_id = {cache.cache_id: cache for cache in caches}
        cache = by_id.get(cache_id)
        if cache is None:
            raise exception.CacheNotFound(cache_id=cache_id)
        if cache.current_mode != mode.value:
            raise exception.CacheModeMismatch(
                mode=mode.value, cache_id=cache_id, actual=cache.mode,
                present=', '.join('%d=%s' % (c.cache_id, c.mode)
                                  for c in caches) or 'none')
        if not _usable(cache.status):
            raise exception.CacheNotRunning(
                cache_id=cache_id, status=cache.status,
                advice='Start or load it (casctl start) and retry.')
        return cache_id

    def place(self, requested: modes.CacheMode,
              caches: list[casadm_output.CacheInstance]) -> Placement:
        """Choose the instance for *requested*, applying the fallback policy.

        A mode/instance mismatch is always an error: it means the
        configuration is wrong, and guessing could put a volume in a mode
        that holds dirty data the operator did not ask for.
        """
        reason = 'no instance configured'
        if requested in self.instances:
            try:
                return Placement(requested, requested,
                                 self._check_instance(requested, caches))
            except exception.CacheModeMismatch:
                raise
            except exception.CasError as exc:
                reason = str(exc)
        if self.fallback_policy == opts.FALLBACK_CLEAN_MODE:
            for mode in modes.CLEAN_MODES:
                if mode == requested or mode not in self.instances:
                    continue
                try:
                    return Placement(requested, mode,
                                     self._check_instance(mode, caches))
                except exception.CacheModeMismatch:
                    raise
                except exception.CasError:
                    continue
        elif self.fallback_policy == opts.FALLBACK_UNCACHED:
            return Placement(requested, None, None)
        raise exception.NoCacheForMode(mode=requested.value, reason=reason)
