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

"""Run the privsep entry points in the test process (no daemon)."""

import fixtures
import os_brick.privileged

import os_brick_cas.privileged


class PrivsepInProcess(fixtures.Fixture):
    """os-brick-cas's and os-brick's contexts in client mode off.

    The entry points still validate their arguments and build their own
    argv; only the fork of a root daemon is skipped.
    """

    def _setUp(self) -> None:
        for context in (os_brick_cas.privileged.default,
                        os_brick_cas.privileged.flush,
                        os_brick.privileged.default):
            context.set_client_mode(False)
            self.addCleanup(context.set_client_mode, True)
