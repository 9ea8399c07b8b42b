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


"""Differences between the cinder releases cinder_ext supports.

The only place cinder_ext tells cinder releases apart (release detection:
:mod:`os_brick_cas.compat`); each branch names its release.
"""

from os_brick_cas import compat

#: the supported release of the installed cinder (None: older than 2025.1)
RELEASE = compat.release_of('cinder')


def main_context_manager():
    """cinder's database transaction context (oslo.db enginefacade).

    2026.2 (cinder 29) has it in ``cinder.db.api``; 2025.1 (cinder 26) and
    2026.1 (cinder 28) in ``cinder.db.sqlalchemy.api``.
    """
    if compat.at_least(RELEASE, '2026.2'):
        from cinder.db import api
    else:
        from cinder.db.sqlalchemy import api
    return api.main_context_manager
