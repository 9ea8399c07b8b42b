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

"""Command-line arguments several commands share."""

import argparse
import socket


def add_host_argument(parser: argparse.ArgumentParser) -> None:
    """``--host``: this compute host as nova (and Cinder's marker) names it."""
    parser.add_argument('--host', default=socket.gethostname(),
                        help="this compute host's name as nova knows it, "
                             "to compare with Cinder's owner records "
                             '(default: %(default)s)')
