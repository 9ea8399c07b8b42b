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
"""Run an upstream test module against one of our subclasses.

The upstream module names the class under test through a module alias
(``rbd.RBDConnector``, ``driver.RBDDriver``,
``libvirt_driver.LibvirtDriver``). The alias is replaced by a proxy module
that answers the class name with our subclass and forwards every other
read and write (``mock.patch.object``) to the real module. The real module
is left alone, so a parent that calls ``super(Parent, self)`` still finds
its own class.
"""

import ast
import importlib
import inspect
import pkgutil
import types
import unittest

import testtools


class ProxyModule(types.ModuleType):
    """A module that overrides some names and forwards the rest."""

    def __init__(self, real: types.ModuleType, overrides: dict) -> None:
        super().__init__(real.__name__)
        object.__setattr__(self, '_real', real)
        object.__setattr__(self, '_overrides', dict(overrides))

    def __getattribute__(self, name: str):
        overrides = object.__getattribute__(self, '_overrides')
        if name in overrides:
            return overrides[name]
        if name in ('_real', '_overrides', '__class__'):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, '_real'), name)

    def __setattr__(self, name: str, value) -> None:
        overrides = object.__getattribute__(self, '_overrides')
        if name in overrides:
            overrides[name] = value
        else:
            setattr(object.__getattribute__(self, '_real'), name, value)

    def __delattr__(self, name: str) -> None:
        overrides = object.__getattribute__(self, '_overrides')
        if name in overrides:
            raise AttributeError('%s is swapped by the harness' % name)
        delattr(object.__getattribute__(self, '_real'), name)


def swap(test_module: types.ModuleType, alias: str, class_name: str,
         subclass: type) -> None:
    """Make ``test_module.<alias>.<class_name>`` our subclass."""
    real = getattr(test_module, alias)
    if isinstance(real, ProxyModule):
        return
    parent = getattr(real, class_name)
    if not issubclass(subclass, parent):
        raise TypeError('%s is not a subclass of %s.%s'
                        % (subclass, real.__name__, class_name))
    setattr(test_module, alias, ProxyModule(real, {class_name: subclass}))


def load(loader: unittest.TestLoader,
         module_names: list) -> unittest.TestSuite:
    """The tests of the named upstream modules, in one suite."""
    suite = unittest.TestSuite()
    for name in module_names:
        suite.addTests(loader.loadTestsFromModule(
            importlib.import_module(name)))
    return suite


def modules_under(package_name: str) -> list:
    """The test_*.py module names of an upstream test package."""
    package = importlib.import_module(package_name)
    return sorted(
        '%s.%s' % (package_name, info.name)
        for info in pkgutil.iter_modules(package.__path__)
        if info.name.startswith('test_'))


def reaching(parent: type, subclass: type) -> set:
    """*parent*'s methods from which one the subclass overrides is reached.

    Read from the parent's own source (ast): a method is in the set when it
    is overridden or when its body calls, as ``self.<name>``, a method
    already in the set, to a fixed point. Leading underscores are dropped.
    """
    found = {name for name, value in vars(subclass).items()
             if name != '__init__' and callable(getattr(parent, name, None))
             and (callable(value) or isinstance(value, staticmethod))}
    tree = ast.parse(inspect.getsource(inspect.getmodule(parent)))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef)
                and node.name == parent.__name__).body
    calls = {function.name: {node.attr for node in ast.walk(function)
                             if isinstance(node, ast.Attribute)
                             and isinstance(node.value, ast.Name)
                             and node.value.id == 'self'}
             for function in body if isinstance(function, ast.FunctionDef)}
    while True:
        more = {name for name, called in calls.items()
                if called & found} - found
        if not more:
            return {name.strip('_') for name in found}
        found |= more


def named_after(suite: unittest.TestSuite, names: set) -> unittest.TestSuite:
    """The tests of *suite* whose method name contains one of *names*."""
    return unittest.TestSuite(
        test for test in testtools.iterate_tests(suite)
        if any(name in test.id().rpartition('.')[2] for name in names))
