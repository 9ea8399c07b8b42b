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

"""The host simulator: stand-in casadm, rbd and udevadm for tests and demo.

A test double, not the product: os_brick_cas never imports it. Tests
import it from the test tree; ``os-brick-cas demo`` finds
:class:`cas_standin.fixture.SimulatedHost` through the
``os_brick_cas.simulated_host`` entry point. It may import the facts in
:mod:`os_brick_cas.opencas` (and the leaf :mod:`os_brick_cas.rbd_names`),
so it prints what the product parses.
"""
