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

"""Tempest plugin entry point.

Registered in setup.cfg under ``tempest.test_plugins`` as
``os_brick_cas = os_brick_cas_tempest_plugin.plugin:OsBrickCasTempestPlugin``.
"""

import os

from tempest import config as tempest_config
from tempest.test_discover import plugins

from os_brick_cas_tempest_plugin import config as plugin_config

PACKAGE = 'os_brick_cas_tempest_plugin'


class OsBrickCasTempestPlugin(plugins.TempestPlugin):
    """Tests of Open CAS cached Cinder volumes and their options."""

    def load_tests(self):
        """(directory of the tests, top level directory to import from).

        The top level is the directory holding this package, so test ids
        start with ``os_brick_cas_tempest_plugin.tests.``.
        """
        package_dir = os.path.dirname(os.path.abspath(__file__))
        return (os.path.join(package_dir, 'tests'),
                os.path.dirname(package_dir))

    def register_opts(self, conf):
        for group, options in plugin_config.list_opts():
            tempest_config.register_opt_group(conf, group, options)

    def get_opt_lists(self):
        return [(group.name, options)
                for group, options in plugin_config.list_opts()]
