# Fixtures for the pyocf reproducers: an OCF context built from the pyocf
# tree on PYTHONPATH (tools/run-pyocf-tests.sh sets it to a built
# ocf/tests/functional).
import gc

import pytest

from pyocf.types.ctx import OcfCtx
from pyocf.types.logger import DefaultLogger
from pyocf.types.logger import LogLevel
from pyocf.types.volume import RamVolume
from pyocf.types.volume_cache import CacheVolume
from pyocf.types.volume_core import CoreVolume

from gated_volume import GatedVolume


@pytest.fixture()
def ocf_ctx():
    """An OCF context with the volume types the reproducers use."""
    ctx = OcfCtx.with_defaults(DefaultLogger(LogLevel.WARN))
    for volume_type in (RamVolume, GatedVolume, CacheVolume, CoreVolume):
        ctx.register_volume_type(volume_type)
    yield ctx
    ctx.exit()
    gc.collect()
