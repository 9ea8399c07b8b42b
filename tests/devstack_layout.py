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

"""The devstack plugin's host layout, read by the product's own parser.

The plugin's test harness keeps /dev/disk/by-id under its scratch
directory (``OPEN_CAS_BY_ID_DIR``); the parser accepts cache devices only
under /dev/disk/by-id. The layout is validated with the scratch prefix
mapped to /dev/disk/by-id, and the instances returned with their paths as
the plugin wrote them.
"""

import dataclasses
import os

from os_brick_cas.host import layout_file

BY_ID = '/dev/disk/by-id'


def load(path: str) -> layout_file.HostLayout:
    scratch = os.environ.get('OPEN_CAS_BY_ID_DIR', BY_ID)
    with open(path) as source:
        text = source.read()
    parsed = layout_file.parse(text.replace(scratch, BY_ID), path)
    return dataclasses.replace(parsed, instances=tuple(
        dataclasses.replace(item, device=item.device.replace(BY_ID, scratch))
        if item.device.startswith(BY_ID + '/') else item
        for item in parsed.instances))
