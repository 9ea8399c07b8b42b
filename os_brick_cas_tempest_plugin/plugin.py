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

"""Tempest plugin entry point (``tempest.test_plugins``: os_brick_cas)."""

import os

from tempest import config
from tempest.test_discover import plugins

from os_brick_cas_tempest_plugin import config as plugin_config


class OsBrickCasTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        base_path = os.path.split(os.path.dirname(
            os.path.abspath(__file__)))[0]
        test_dir = 'os_brick_cas_tempest_plugin/tests'
        return os.path.join(base_path, test_dir), base_path

    def register_opts(self, conf):
        config.register_opt_group(conf, plugin_config.group,
                                  plugin_config.opts)

    def get_opt_lists(self):
        return [(plugin_config.group.name, plugin_config.opts)]
