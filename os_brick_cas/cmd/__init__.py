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

"""The operator command line.

Imported before any command module, so before oslo.privsep imports
eventlet: eventlet's deprecation notice (nine lines on import) is for
library maintainers, not for an operator running a command (``main``
silences the other deprecation warnings of a run). ``python -W ...`` or
``PYTHONWARNINGS`` still shows them.
"""

import sys
import warnings

if not sys.warnoptions:
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
