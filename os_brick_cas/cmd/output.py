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

"""One output flag for every listing command: table, json, yaml, value.

The formats and their meaning follow cliff (python-openstackclient):
``value`` prints each row's values separated by spaces, no header, for
shell loops; ``json`` and ``yaml`` print the whole document.
"""

import json
import sys
from typing import Any, Callable, Iterable, Sequence

import yaml

FORMATS = ('table', 'json', 'yaml', 'value')


def _cell(value: Any) -> str:
    return '' if value is None else str(value)


def emit(fmt: str, document: Any, table: Callable[[], str],
         rows: Callable[[], Iterable[Sequence[Any]]]) -> None:
    """Print *document* in *fmt* (table and value built only when asked)."""
    if fmt == 'json':
        text = json.dumps(document, indent=2, sort_keys=True) + '\n'
    elif fmt == 'yaml':
        text = yaml.safe_dump(document, default_flow_style=False,
                              sort_keys=True)
    elif fmt == 'value':
        text = ''.join(' '.join(_cell(v) for v in row) + '\n'
                       for row in rows())
    else:
        text = table()
    sys.stdout.write(text)
