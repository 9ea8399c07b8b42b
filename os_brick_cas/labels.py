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

"""How a core names itself in messages and logs: one wording everywhere.

A leaf (no imports of the suite), so exceptions, casadm records, reports
and the CLI all say it the same way. "cache instance", not "instance":
next to a nova instance (a server) the bare word is ambiguous.
"""

from typing import Union

#: what :func:`core` says for a whole-instance operation (``core=None``)
ALL_CORES = 'all'


def core(cache_id: Union[int, str, None],
         core_id: Union[int, str, None]) -> str:
    """E.g. ``core 3 of cache instance 1`` (lower case, for mid-sentence).

    *core_id* None or ``'all'`` is every core of the instance.
    """
    if core_id is None or core_id == ALL_CORES:
        return 'all cores of cache instance %s' % (cache_id,)
    return 'core %s of cache instance %s' % (core_id, cache_id)


def cache_instance(cache_id: Union[int, str], mode: str = '') -> str:
    """E.g. ``cache instance 2 (wb)``; without *mode* just the id."""
    label = 'cache instance %s' % (cache_id,)
    return '%s (%s)' % (label, mode) if mode else label
