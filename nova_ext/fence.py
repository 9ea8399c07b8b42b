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

"""The fence marker as nova-compute uses it (nova's [cinder] credentials)."""

from typing import Any, Callable

from nova import context as nova_context
from nova.volume import cinder as nova_cinder

from os_brick_cas import fence


def _admin_client() -> Any:
    # An admin context without a token makes nova use the [cinder] auth
    # section of nova.conf, as its periodic tasks do.
    return nova_cinder.cinderclient(nova_context.get_admin_context())


#: builds the cinderclient for fence calls; tests point it at a fake Cinder
client_factory: Callable[[], Any] = _admin_client


def client() -> fence.FenceClient:
    return fence.FenceClient(client_factory())
