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

"""How the CLI's readable reports show numbers and columns.

Sizes are human units (``160 KiB``) unless ``--raw`` asks for the exact
figures (dirty data in casadm's 4 KiB blocks); columns are as wide as their
longest cell, so a long by-id path never pushes the others out of line.
"""

import argparse
import json
import sys
from typing import Any, Callable, Collection, Optional, Sequence

from os_brick_cas.host import sizing

#: casadm counts dirty data in 4 KiB blocks
BLOCK_BYTES = 4096


def add_raw_argument(parser: argparse.ArgumentParser) -> None:
    """``--raw``: exact numbers instead of human units."""
    parser.add_argument('--raw', action='store_true',
                        help='exact numbers instead of human units (dirty '
                             'data in 4 KiB blocks as casadm counts it, '
                             'sizes in bytes)')


def size(count: Optional[float], raw: bool = False) -> str:
    """A size in bytes: ``1.5 GiB``, or the byte count with *raw*."""
    if count is None:
        return '-'
    return str(int(count)) if raw else sizing.human(count)


def dirty(blocks: Optional[int], raw: bool = False) -> str:
    """Dirty data: ``160 KiB``, or casadm's 4 KiB block count with *raw*."""
    if blocks is None:
        return '-'
    return str(blocks) if raw else sizing.human(blocks * BLOCK_BYTES)


def align(rows: Sequence[Sequence[Any]], right: Collection[int] = (),
          indent: str = '') -> list[str]:
    """*rows* as lines of columns as wide as their widest cell.

    Columns whose index is in *right* are right-aligned (numbers); the
    last column is not padded.
    """
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells if i < len(row))
              for i in range(max((len(row) for row in cells), default=0))]
    lines = []
    for row in cells:
        parts = []
        for i, cell in enumerate(row):
            last = i == len(row) - 1
            if i in right:
                parts.append(cell.rjust(widths[i]))
            else:
                parts.append(cell if last else cell.ljust(widths[i]))
        lines.append((indent + '  '.join(parts)).rstrip())
    return lines


def emitter(args: argparse.Namespace) -> Callable[..., None]:
    """``args.emit`` as the cliff verb set it, else plain text (or JSON)."""
    found = getattr(args, 'emit', None)
    if found is not None:
        return found

    def emit(document: dict, columns: Sequence[str], rows: Any,
             text: Optional[Callable[[], str]] = None) -> None:
        sys.stdout.write(text() if text is not None else
                         json.dumps(document, indent=2, sort_keys=True) + '\n')
    return emit
