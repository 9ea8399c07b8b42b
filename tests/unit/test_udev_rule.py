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

"""The shipped udev rule keeps udev's inotify watch off /dev/casX-Y.

udev reads rule files in name order; a later OPTIONS+="watch" wins over an
earlier OPTIONS+="nowatch" unless that one was assigned with ":=" (final:
systemd's udev-rules.c, TK_A_OPTIONS_INOTIFY_WATCH). The shipped rule is
evaluated here, line by line with those semantics, before the line Open
CAS's own 60-persistent-storage-cas.rules carries (v24.9 to v26.03.2).
The real-kernel tier (tests/kernel/test_udev_watch.py) shows the effect on
the device's read counter.
"""

import fnmatch
import os
import re
from typing import Optional

import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RULE_NAME = '60-os-brick-cas-rbd.rules'
RULE = os.path.join(ROOT, 'etc', 'udev', 'rules.d', RULE_NAME)
OPENCAS_RULE_NAME = '60-persistent-storage-cas.rules'
OPENCAS_WATCH_LINE = 'SUBSYSTEM=="block", KERNEL=="cas*", OPTIONS+="watch"'
KEY = re.compile(r'([A-Z]+(?:\{[^}]*\})?)\s*(==|!=|\+=|:=|=)\s*"([^"]*)"')


def rule_lines(text: str) -> list[list[tuple[str, str, str]]]:
    """(key, operator, value) triples of each rule line (no comments)."""
    return [KEY.findall(line) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith('#')]


def matches(pattern: str, value: str) -> bool:
    return any(fnmatch.fnmatchcase(value, alternative)
               for alternative in pattern.split('|'))


def watch_after(files: list[str], device: dict[str, str]) -> Optional[bool]:
    """Whether udev watches *device* after these rule files, in order."""
    watch, final = None, False
    for text in files:
        for line in rule_lines(text):
            tests = [(key, op, value) for key, op, value in line
                     if op in ('==', '!=') and key in device]
            if any((op == '==') != matches(value, device[key])
                   for key, op, value in tests):
                continue
            for key, op, value in line:
                if key != 'OPTIONS' or value not in ('watch', 'nowatch'):
                    continue
                if not final:
                    watch, final = value == 'watch', op == ':='
    return watch


class UdevWatchRuleTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        with open(RULE) as rule:
            self.rule = rule.read()
        # the order udev reads them in
        self.assertLess(RULE_NAME, OPENCAS_RULE_NAME)

    def device(self, kernel: str, action: str = 'change') -> dict[str, str]:
        return {'SUBSYSTEM': 'block', 'KERNEL': kernel, 'ACTION': action}

    def test_no_watch_on_cas_exported_objects(self):
        for kernel in ('cas1-1', 'cas12-3', 'cas1-1p1'):
            for action in ('add', 'change'):
                self.assertIs(False, watch_after(
                    [self.rule, OPENCAS_WATCH_LINE],
                    self.device(kernel, action)), (kernel, action))

    def test_other_devices_keep_their_watch(self):
        self.assertIsNone(watch_after([self.rule],
                                      self.device('rbd0')))
        self.assertIs(True, watch_after(
            [self.rule, 'KERNEL=="sd*", OPTIONS+="watch"'],
            self.device('sda')))

    def test_an_earlier_plain_nowatch_would_lose(self):
        # the reason for ":=": what a "+=" line would give
        plain = self.rule.replace('OPTIONS:="nowatch"', 'OPTIONS+="nowatch"')
        self.assertIs(True, watch_after([plain, OPENCAS_WATCH_LINE],
                                        self.device('cas1-1')))
