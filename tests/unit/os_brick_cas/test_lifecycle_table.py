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

"""The life-cycle table in the code and in the admin guide are one table.

The admin guide (doc/source/admin/lifecycle.rst) draws the states (with
stable or in-flight marked) and the transitions; this test reads both
simple tables and compares them with :mod:`os_brick_cas.lifecycle`.
"""

import ast
import os
import re

import testtools

import nova_ext
import os_brick_cas
from os_brick_cas import lifecycle

PAGE = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'doc',
                    'source', 'admin', 'lifecycle.rst')


def simple_tables(text: str) -> list[list[list[str]]]:
    """The rows of each reST simple table (columns by the === rulers)."""
    tables, lines = [], text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if (line.startswith('==') and ' ' in line.rstrip() and
                set(line) <= {'=', ' '}):
            spans, start = [], None
            for pos, char in enumerate(line + ' '):
                if char == '=' and start is None:
                    start = pos
                elif char != '=' and start is not None:
                    spans.append((start, pos))
                    start = None
            rows, rulers, index = [], 1, index + 1
            while index < len(lines) and rulers < 3:
                row = lines[index]
                if row == line:
                    rulers += 1
                elif row.strip():
                    cells = [row[a:b if i < len(spans) - 1 else None]
                             .strip() for i, (a, b) in enumerate(spans)]
                    if cells[0] or not rows:
                        rows.append(cells)
                    else:   # a continuation line
                        rows[-1] = [' '.join(filter(None, pair))
                                    for pair in zip(rows[-1], cells)]
                index += 1
            tables.append(rows)
        else:
            index += 1
    return tables


class AdminGuideTableTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        with open(PAGE) as page:
            self.tables = simple_tables(page.read())

    def table(self, first_header: str) -> list[list[str]]:
        [rows] = [t for t in self.tables if t and t[0][0] == first_header]
        return rows[1:]

    def test_states_and_their_kind_are_the_code_s(self):
        documented = {row[0]: row[1] for row in self.table('state')}
        self.assertEqual(
            {state: ('in-flight' if state in lifecycle.IN_FLIGHT
                     else 'stable') for state in lifecycle.STATES},
            documented)

    def test_transitions_are_the_code_s(self):
        documented = set()
        for row in self.table('from'):
            for state in row[0].split(', '):
                target = state if row[2] == '(same)' else row[2]
                documented.add((state, row[1], target))
        self.assertEqual(
            {(state, event, target) for (state, event), target in
             lifecycle.TRANSITIONS.items()}, documented)

    def test_the_diagram_names_every_state(self):
        with open(PAGE) as page:
            text = page.read()
        start = text.index('In the diagram')
        diagram = text[start:text.index('Time bounds', start)]
        missing = [state for state in lifecycle.STATES
                   if re.search(r'\b%s\b' % state, diagram) is None]
        self.assertEqual([], missing)

    def test_every_row_names_who_sends_it(self):
        for row in self.table('from'):
            self.assertTrue(row[3], 'row %s names no sender' % row[:3])


def sent_events() -> set[str]:
    """Events library code passes to advance/require/next_state (ast)."""
    events = set()
    for top in (os.path.dirname(os_brick_cas.__file__),
                os.path.dirname(nova_ext.__file__)):
        for directory, dirs, files in os.walk(top):
            for name in (n for n in files if n.endswith('.py')):
                with open(os.path.join(directory, name)) as source:
                    tree = ast.parse(source.read())
                for call in (n for n in ast.walk(tree)
                             if isinstance(n, ast.Call)):
                    func = call.func
                    called = getattr(func, 'attr', getattr(func, 'id', ''))
                    if called not in ('advance', 'require', 'next_state'):
                        continue
                    for arg in call.args:
                        events.update(
                            c.value for c in ast.walk(arg)
                            if isinstance(c, ast.Constant) and
                            isinstance(c.value, str))
                # require() turns an attach of an inactive core into this
                events.update(
                    c.value for c in ast.walk(tree)
                    if isinstance(c, ast.Constant) and
                    c.value == 'reactivate')
    return events


class EveryRowIsSentTestCase(testtools.TestCase):

    def test_every_event_of_the_table_is_sent_by_some_path(self):
        sent = sent_events()
        never = sorted({event for (state, event) in lifecycle.TRANSITIONS
                        if event not in sent})
        self.assertEqual([], never)

    def test_every_state_is_reachable_from_absent(self):
        reached, frontier = {lifecycle.ABSENT}, [lifecycle.ABSENT]
        classified = {lifecycle.INACTIVE, lifecycle.STALE,
                      lifecycle.ORPHANED}     # what the host or Cinder shows
        reached |= classified
        frontier += sorted(classified)
        while frontier:
            state = frontier.pop()
            for (source, event), target in lifecycle.TRANSITIONS.items():
                if source == state and target not in reached:
                    reached.add(target)
                    frontier.append(target)
        self.assertEqual(set(lifecycle.STATES), reached)
