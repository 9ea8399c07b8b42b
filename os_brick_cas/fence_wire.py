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

"""The fence marker on the wire: names and patterns both ends agree on.

Cinder's API extension (:mod:`cinder_ext.api.fence`) accepts what the host
library (:mod:`os_brick_cas.fence`, :mod:`os_brick_cas.validation`) sends
and reads, so both take the action, field and attribute names and the
host and epoch patterns from here. No nova, cinder or cinderclient
imports: cinder-api and compute hosts both load this module.

An epoch is the Cinder attachment that cached a volume's data: its
attachment id, a UUID (36 characters: hex digits and dashes). The host
journal and ownership records store it, and the privileged entry points
take it, so the pattern refuses a leading dash (an epoch must never read
as a command-line option); it allows 1-64 letters, digits and dashes,
which every UUID and every older id fits. A host is nova's name of the
compute host (``[DEFAULT] host``): letters, digits and ``_.:@-``; never
``/`` or ``,``, which separate the entries of the lost record.
"""

import re
from typing import TypeGuard

#: volume actions (POST /volumes/{id}/action)
SET_ACTION = 'os-brick-cas-set-fence'
CLEAR_ACTION = 'os-brick-cas-clear-fence'

#: fields of the action bodies
HOST = 'host'
EPOCH = 'epoch'
DRAINED = 'drained'
LOST = 'lost'
EXPECT = 'expect'
#: the keys of an ``expect`` record (the marker the caller read)
EXPECT_KEYS = frozenset((HOST, EPOCH, DRAINED))

#: attributes volume show adds (admin or service role)
ATTRIBUTE = 'os-brick-cas:fence'
EPOCH_ATTRIBUTE = 'os-brick-cas:fence-epoch'
LOST_ATTRIBUTE = 'os-brick-cas:fence-lost'
DRAINED_ATTRIBUTE = 'os-brick-cas:fence-drained'
#: the lost record: ``host/epoch`` entries, comma separated, newest last
LOST_SEPARATOR = ','
LOST_HOST_SEPARATOR = '/'

HOST_PATTERN = re.compile(r'[A-Za-z0-9_.:@-]{1,255}')
EPOCH_PATTERN = re.compile(r'[A-Za-z0-9][A-Za-z0-9-]{0,63}')


def is_host(value: object) -> TypeGuard[str]:
    """Whether *value* is a compute host name the marker may hold."""
    return isinstance(value, str) and bool(HOST_PATTERN.fullmatch(value))


def is_epoch(value: object) -> TypeGuard[str]:
    """Whether *value* is an attachment epoch the marker may hold."""
    return isinstance(value, str) and bool(EPOCH_PATTERN.fullmatch(value))
