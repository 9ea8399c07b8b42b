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

"""What doctor's ``use_io_scheduler`` check rests on, in OCF itself.

cas_cache starts every instance with ``use_submit_io_fast = !use_io_scheduler``
(a module parameter, 1 by default). With the flag set, OCF's
``_ocf_core_req_resolve_fast_mode`` puts a write-through write hit on the
fast path, whose write handler is the write-back one: the line stays dirty
in the cache and the core keeps the old data until a flush. These tests
pin that down on the release being built (they pass when OCF behaves so):
if a release stops doing it, they fail and the doctor check can go.

pyocf's own ``Cache(use_submit_fast=...)`` passes a keyword its ctypes
config does not have (``_use_submit_fast`` for ``_use_submit_io_fast``),
which ctypes keeps as a Python attribute: the flag never reaches OCF. The
config class is replaced here so that it does.
"""

from ctypes import c_int

import pytest

import pyocf.types.cache as pyocf_cache
from pyocf.types.cache import Cache
from pyocf.types.cache import CacheMode
from pyocf.types.cache import CleaningPolicy
from pyocf.types.core import Core
from pyocf.types.data import Data
from pyocf.types.io import IoDir
from pyocf.types.shared import CacheLineSize
from pyocf.types.shared import OcfCompletion
from pyocf.types.shared import SeqCutOffPolicy
from pyocf.types.volume import RamVolume
from pyocf.types.volume_core import CoreVolume
from pyocf.utils import Size

BLOCK = 4096
OLD = (b'old data, 4 KiB ' * 256)[:BLOCK]
NEW = (b'new data, 4 KiB ' * 256)[:BLOCK]


class SubmitFastConfig(pyocf_cache.CacheConfig):
    """pyocf's cache config with its fast-path keyword reaching OCF."""

    def __init__(self, *args, **kwargs):
        if '_use_submit_fast' in kwargs:
            kwargs['_use_submit_io_fast'] = kwargs.pop('_use_submit_fast')
        super().__init__(*args, **kwargs)


def submit(volume, queue, direction, payload=None):
    data = Data.from_bytes(payload) if payload is not None else Data(BLOCK)
    io = volume.new_io(queue, 0, BLOCK, direction, 0, 0)
    io.set_data(data)
    done = OcfCompletion([('err', c_int)])
    io.callback = done.callback
    io.submit()
    assert done.wait(60), 'the IO never completed'
    assert done.results['err'] == 0, done.results['err']
    return bytes(data.get_bytes())


@pytest.mark.parametrize('mode', [CacheMode.WT, CacheMode.WA])
@pytest.mark.parametrize('submit_fast', [False, True])
def test_a_write_hit_reaches_the_core_only_without_the_fast_path(
        ocf_ctx, monkeypatch, mode, submit_fast):
    monkeypatch.setattr(pyocf_cache, 'CacheConfig', SubmitFastConfig)
    cache_device = RamVolume(Size.from_MiB(64))
    core_device = RamVolume(Size.from_MiB(16))
    cache = Cache.start_on_device(
        cache_device, cache_mode=mode,
        cache_line_size=CacheLineSize.LINE_4KiB, use_submit_fast=submit_fast)
    cache.set_cleaning_policy(CleaningPolicy.NOP)    # no background flush
    core = Core.using_device(core_device)
    cache.add_core(core)
    cache.set_seq_cut_off_policy(SeqCutOffPolicy.NEVER)
    queue = cache.get_default_queue()
    volume = CoreVolume(core)
    volume.open()
    try:
        submit(volume, queue, IoDir.WRITE, OLD)
        submit(volume, queue, IoDir.READ)     # wa: the read maps the line
        cache.settle()
        before = core.get_stats()['req']['wr_hits']['value']
        submit(volume, queue, IoDir.WRITE, NEW)   # a write hit
        cache.settle()
        stats = cache.get_stats()
        hits = core.get_stats()['req']['wr_hits']['value'] - before
        on_core = bytes(core_device.get_bytes()[:BLOCK])
        dirty = stats['usage']['dirty']['value']
        assert stats['conf']['cache_mode'] == mode
        assert hits == 1, 'the second write was not a hit'
        assert submit(volume, queue, IoDir.READ) == NEW
        if submit_fast:
            # the instance still says wt/wa; the hit is a write-back write
            assert (on_core, dirty) == (OLD, 1)
            cache.flush()
            assert bytes(core_device.get_bytes()[:BLOCK]) == NEW
        else:
            assert (on_core, dirty) == (NEW, 0)
    finally:
        volume.close()
        cache.stop()
