# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""cinder's volume/drivers/test_rbd.py against CachedRBDDriver."""

from cinder.tests.unit.volume.drivers import test_rbd

from cinder_ext import rbd
from tests.upstream import harness

harness.swap(test_rbd, 'driver', 'RBDDriver', rbd.CachedRBDDriver)


def load_tests(loader, standard_tests, pattern):
    return harness.load(loader, [test_rbd.__name__])
