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

"""The volume-type contract of os-brick-cas: which extra specs mean what.

``cacheable='<is> True'`` is cinder's own key (kept compatible: cinder copies
it into connection_info and the scheduler matches it against the backend's
``cacheable`` capability); ``cas:cache_mode`` chooses the Open CAS mode;
``cas:cache_share`` caps a volume's part of its cache instance (a whole
percent, 1-100: Open CAS stores IO-class allocations in whole percent). One
function, :func:`validate`, is used everywhere (API extension, driver,
operator tool). No cinder imports: nova_ext and the CLI use it too.
"""

import dataclasses
from typing import Mapping, Optional

from os_brick_cas import modes

CACHEABLE = 'cacheable'
CACHE_MODE = 'cas:cache_mode'
CACHE_SHARE = 'cas:cache_share'
MULTIATTACH = 'multiattach'
TRUE = '<is> True'
FALSE = '<is> False'
DEFAULT_MODE = modes.CacheMode.WRITE_THROUGH.value


class ExtraSpecError(ValueError):
    """A volume type's extra specs break the os-brick-cas contract."""


@dataclasses.dataclass(frozen=True)
class CacheSpec:
    """What a volume type asks of the compute host's cache."""

    cacheable: bool
    mode: Optional[str]
    #: the volume's cap, in whole percent of its cache instance (1..100)
    share: Optional[int] = None

    @property
    def holds_dirty_data(self) -> bool:
        return bool(self.cacheable and self.mode and
                    modes.CacheMode(self.mode).holds_dirty_data)


def validate(specs: Optional[Mapping[str, str]]) -> CacheSpec:
    """Check *specs* and return the cache they ask for.

    Raises ExtraSpecError naming the key and the allowed values.
    """
    specs = specs or {}
    raw_cacheable = specs.get(CACHEABLE)
    if raw_cacheable not in (None, TRUE, FALSE):
        raise ExtraSpecError(
            "Extra spec '%s' is %r; allowed values are '%s' and '%s'."
            % (CACHEABLE, raw_cacheable, TRUE, FALSE))
    cacheable = raw_cacheable == TRUE
    mode = specs.get(CACHE_MODE)
    if mode is not None:
        if mode not in modes.ALL_MODES:
            raise ExtraSpecError(
                "Extra spec '%s' is %r; allowed values are %s."
                % (CACHE_MODE, mode, ', '.join(modes.ALL_MODES)))
        if not cacheable:
            raise ExtraSpecError(
                "Extra spec '%s' needs '%s' set to '%s'."
                % (CACHE_MODE, CACHEABLE, TRUE))
    if cacheable and specs.get(MULTIATTACH) == TRUE:
        raise ExtraSpecError(
            "Extra specs '%s' and '%s' cannot both be '%s': each host's "
            "cache would go stale under the other's writes."
            % (CACHEABLE, MULTIATTACH, TRUE))
    share = _share(specs.get(CACHE_SHARE), cacheable, mode or DEFAULT_MODE)
    if not cacheable:
        return CacheSpec(False, None)
    return CacheSpec(True, mode or DEFAULT_MODE, share)


def _share(raw: Optional[str], cacheable: bool, mode: str) -> Optional[int]:
    """``cas:cache_share`` as a whole percent, or None if not set.

    Accepted: ``'25'`` or ``'25%'``. A fraction (``'0.25'``) is refused
    rather than guessed: Open CAS keeps whole percent only.
    """
    if raw is None:
        return None
    text = raw.strip()
    text = text[:-1].rstrip() if text.endswith('%') else text
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 100):
        raise ExtraSpecError(
            "Extra spec '%s' is %r; allowed values are whole percents of "
            "the cache instance from 1 to 100, e.g. '25' or '25%%'."
            % (CACHE_SHARE, raw))
    if not cacheable:
        raise ExtraSpecError(
            "Extra spec '%s' needs '%s' set to '%s'."
            % (CACHE_SHARE, CACHEABLE, TRUE))
    if mode == modes.CacheMode.PASS_THROUGH.value:
        raise ExtraSpecError(
            "Extra spec '%s' needs a caching mode: '%s' is 'pt' "
            "(pass-through), which keeps no data in the cache to share."
            % (CACHE_SHARE, CACHE_MODE))
    return int(text)
