# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""The upstream harness's choice of tests on an older release."""

import unittest

import testtools

from tests.upstream import harness


class Parent(object):
    def public(self):
        return self._helper()

    def _helper(self):
        return self.overridden()

    def overridden(self):
        return 1

    def unrelated(self):
        return self.other()

    def other(self):
        return 2


class Child(Parent):
    def overridden(self):
        return 3

    def added(self):
        return 4


class UpstreamCases(unittest.TestCase):
    """Stands for an upstream module (named case_*: never collected)."""

    def case_public_path(self):
        pass

    def case_overridden_once(self):
        pass

    def case_unrelated_path(self):
        pass


class ReachingTestCase(testtools.TestCase):

    def test_callers_of_an_override_are_followed_to_a_fixed_point(self):
        self.assertEqual({'overridden', 'helper', 'public'},
                         harness.reaching(Parent, Child))

    def test_only_tests_named_after_those_methods_are_kept(self):
        suite = unittest.TestSuite(unittest.TestSuite([
            UpstreamCases(name) for name in
            ('case_public_path', 'case_overridden_once',
             'case_unrelated_path')]))
        kept = harness.named_after(suite, harness.reaching(Parent, Child))
        self.assertEqual(['case_public_path', 'case_overridden_once'],
                         [t.id().rpartition('.')[2] for t in kept])
