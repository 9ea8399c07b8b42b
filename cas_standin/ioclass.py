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

"""IO-class tables of the stand-in casadm (``-C -C`` / ``-C -L``).

Parsing and messages follow casadm's partition_get_config() and
partition_list() (open-cas-linux casadm/cas_lib.c, commit e7ddd7bb); rule
errors are the kernel's KCAS_ERR_CLS_RULE_* texts (casadm/
extended_err_msg.c). A row is ``[id, name, priority or None (pinned),
allocation in whole percent]``.
"""

import math
import struct
from typing import Optional

COLUMNS = ('IO class id', 'IO class name', 'Eviction priority',
           'Allocation')
MAX_ID = 32
NAME_MAX = 1024
DEFAULT = [[0, 'unclassified', 255, 100]]
HEADER_HELP = ('Failed to parse I/O classes configuration file header. It '
               'is either malformed or missing.\nPlease consult Admin Guide '
               'to check how columns in configuration file should be '
               'named.\n')
#: conditions real Open CAS knows that the stand-in does not classify by
_NOT_SIMULATED = ('metadata', 'direct', 'io_class', 'file_size',
                  'directory', 'file_name_prefix', 'extension',
                  'process_name', 'lba', 'pid', 'file_offset',
                  'request_size', 'wlth', 'io_direction')


class IoClassError(Exception):
    """casadm's error lines (stderr) for a refused table."""


def _number(text: str, what: str, low: int, high: int) -> Optional[str]:
    """casadm's validate_str_num() message, or None if *text* is fine."""
    if not text.isdigit():
        return ('Invalid %s, must be a correct unsigned decimal integer.\n'
                % what)
    if not low <= int(text) <= high:
        return 'Invalid %s, must be in the range %d-%d.\n' % (what, low, high)
    return None


def _allocation(text: str) -> Optional[int]:
    """Whole percent of a 0-1 share of at most 4 characters, else None."""
    if len(text) > 4:
        return None
    try:
        share = float(text)
    except ValueError:
        return None
    if not 0 <= share <= 1:
        return None
    # casadm: round(alloc * 100) on a C float (single precision, strtof)
    return int(math.floor(_f32(_f32(share) * 100) + 0.5))


def _f32(value: float) -> float:
    return struct.unpack('f', struct.pack('f', value))[0]


def _row(cols: list[str], pos: dict[str, int], table: dict[int, list],
         class_0_name: bool) -> tuple[Optional[str], str]:
    """Parse one line into *table*; return (failed column, message)."""
    ident, name, prio, alloc = (cols[pos[c]].strip() for c in COLUMNS)
    if not ident:
        return COLUMNS[0], ''
    error = _number(ident, 'id', 0, MAX_ID)
    if error:
        return COLUMNS[0], error
    class_id = int(ident)
    if class_id in table:
        return COLUMNS[0], ('Double configuration for IO class id %d\n'
                            % class_id)
    if not name or len(name) >= NAME_MAX:
        return COLUMNS[1], 'Empty or too long IO class name\n'
    if any(ch in ',"' or not 32 <= ord(ch) <= 126 for ch in name):
        return COLUMNS[1], ('Only characters allowed in IO class name are '
                            'low ascii characters, excluding control '
                            'characters, comma and quotation mark.\n')
    if class_0_name and class_id == 0 and name != 'unclassified':
        return COLUMNS[1], ("IO class 0 must have the default name "
                            "'unclassified'\n")
    priority = None
    if prio:
        error = _number(prio, 'prio', 0, 255)
        if error:
            return COLUMNS[2], error
        priority = int(prio)
    percent = _allocation(alloc) if alloc else None
    if percent is None:
        return COLUMNS[3], ''
    table[class_id] = [class_id, name, priority, percent]
    return None, ''


def parse(text: str, class_0_name: bool = True) -> list[list]:
    """The rows of an IO-class CSV file, or IoClassError as casadm says.

    *class_0_name*: casadm checks that class 0 is ``unclassified`` (v25.12
    on; before, the kernel refuses it: :func:`check_class_0`).
    """
    lines = text.splitlines()
    if not lines:
        raise IoClassError('Empty IO Classes configuration file supplied.\n')
    header = [c.strip() for c in lines[0].split(',')]
    pos = {}
    for index, name in enumerate(header):
        if name not in COLUMNS:
            raise IoClassError('Cannot parse configuration file - unknown '
                               'column "%s".\n%s' % (name, HEADER_HELP))
        pos[name] = index
    for name in COLUMNS:
        if name not in pos:
            raise IoClassError('Cannot parse configuration file - missing '
                               'column "%s".\n%s' % (name, HEADER_HELP))
    table: dict[int, list] = {}
    for number, line in enumerate(lines[1:], 2):
        cols = line.split(',')
        if len(cols) != len(COLUMNS):
            if not line.strip():
                continue
            raise IoClassError('Cannot parse configuration file - error in '
                               'line %d.\n' % number)
        column, message = _row(cols, pos, table, class_0_name)
        if column:
            message += ('Cannot parse configuration file - error in line %d '
                        'in column %d (%s).\n' % (number, pos[column] + 1,
                                                  column))
        if message:
            raise IoClassError(message)
    if not table:
        raise IoClassError('Empty configuration file\n')
    return [table[i] for i in sorted(table)]


def check_class_0(rows: list[list]) -> None:
    """The kernel's refusal of a table renaming class 0 (before v25.12).

    OCF keeps the default class's name (ocf_mngt_io_class.c).
    """
    if rows and rows[0][0] == 0 and rows[0][1] != 'unclassified':
        raise IoClassError('Invalid input parameter\n')


def check_rules(rows: list[list]) -> None:
    """The kernel classifier's verdict on each rule (what is simulated)."""
    for _id, name, _prio, _alloc in rows:
        if name == 'unclassified':
            continue
        for term in name.split('&'):
            condition = term.split(':')[0]
            if term == 'done':
                continue
            if condition == 'core_id':
                parts = term.split(':')
                if (len(parts) != 3 or parts[1] != 'eq' or
                        _number(parts[2], 'core id', 0, 4095)):
                    raise IoClassError('Invalid classification rule '
                                       'syntax\n')
            elif condition in _NOT_SIMULATED:
                raise IoClassError('IO class condition %s is not simulated '
                                   '(stand-in: core_id:eq:N and done only)\n'
                                   % condition)
            else:
                raise IoClassError('Unexpected classification rule '
                                   'condition\n')


def list_csv(rows: list[list]) -> str:
    """``casadm -C -L -o csv``: pinned priority empty, allocation N.NN."""
    out = [','.join(COLUMNS)]
    for class_id, name, priority, percent in rows:
        out.append('%d,%s,%s,%d.%02d' % (
            class_id, name, '' if priority is None else priority,
            percent // 100, percent % 100))
    return '\n'.join(out) + '\n'
