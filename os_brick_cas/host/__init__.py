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

"""Host preparation, as ``os-brick-cas host`` names it.

:mod:`layout_file` reads the declarative layout, :mod:`prep` plans, applies
and checks it against the live host, :mod:`sizing` and :mod:`flush_rates`
say what an instance costs in RAM and how long it takes to flush,
:mod:`boot` checks the boot order, :mod:`core_tuning` gives a newly added
core the layout's parameters, :mod:`installed_files` renders the files a
host needs outside Python.
"""
