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

"""Cinder sessions of the operator CLI, from the usual client configuration.

The verbs of :mod:`os_brick_cas.cmd.cinder_admin` and doctor's owners
check ask Cinder through here: :func:`cinder` builds a cinderclient from
``OS_CLOUD``/clouds.yaml or the ``OS_*`` variables (openstacksdk's loader),
:func:`owner_source` answers "is Cinder configured at all?" for the checks
that compare cached data with Cinder's fence marker.
"""

import os
from typing import Any, Callable, Optional

from cinderclient import client as cinder_client
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session as ks_session

from os_brick_cas import fence

#: builds a keystoneauth1 session; tests replace it
session_factory: Callable[[], Any] = None  # type: ignore[assignment]


class MissingCredentials(SystemExit):
    """No usable OpenStack credentials: a user error, not a traceback."""


def _env_session() -> ks_session.Session:
    """A keystoneauth session from the standard client configuration.

    ``OS_CLOUD`` (or ``--os-cloud``-style env) names an entry of
    clouds.yaml; otherwise the ``OS_*`` variables are used, as the
    openstack client does (openstacksdk's config loader reads both).
    """
    from openstack import config as os_config
    from openstack import exceptions as os_exceptions
    try:
        region = os_config.OpenStackConfig().get_one(
            cloud=os.environ.get('OS_CLOUD'))
        return region.get_session()
    except (os_exceptions.ConfigException,
            ks_exceptions.MissingRequiredOptions,
            ks_exceptions.NoMatchingPlugin) as exc:
        raise MissingCredentials(
            'os-brick-cas: no usable OpenStack credentials (%s). Set '
            'OS_CLOUD to an entry of clouds.yaml, or source an openrc with '
            'OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME and '
            'the domain variables; an admin (or service) role is needed.'
            % exc)


def cinder(session: Optional[Any] = None) -> Any:
    """A cinderclient v3 client on *session* (default: from OS_* env)."""
    factory = session_factory or _env_session
    return cinder_client.Client('3', session=session or factory())


def owner_source() -> Optional[fence.FenceClient]:
    """For doctor: a fence client, or None without Cinder credentials."""
    if session_factory is None and not (os.environ.get('OS_CLOUD') or
                                        os.environ.get('OS_AUTH_URL')):
        return None
    return fence.FenceClient(cinder())
