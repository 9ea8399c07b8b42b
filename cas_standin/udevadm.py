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

"""Stand-in udevadm: ``settle [--timeout=N]`` only.

The simulated host plays udev's work (links, Open CAS's loader) before the
next stand-in command, so its event queue is always empty: settle exits 0
at once. The call is logged, so tests see when the product waited.
"""

import sys
from typing import Optional

from cas_standin import state as state_mod
from cas_standin.state import Reply


def run(state_dir: str, argv: list[str]) -> tuple[str, Reply]:
    verb = argv[0] if argv else 'unknown'
    if verb != 'settle' or any(not arg.startswith('--timeout=')
                               for arg in argv[1:]):
        return verb, Reply(2, err='udevadm (stand-in): only "settle '
                                  '[--timeout=N]" is simulated\n')
    return verb, Reply(0)


def main(argv: Optional[list[str]] = None) -> int:
    return state_mod.tool_main('udevadm', run, argv)


if __name__ == '__main__':
    sys.exit(main())
