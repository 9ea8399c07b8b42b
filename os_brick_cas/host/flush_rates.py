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

"""How long a write-back instance can take to drain, and how fast it flushes.

The worst case is the most dirty data an instance may hold - the ALRU
dirty-ratio trigger's share of the cache where the release has it
(v25.12+), the whole cache otherwise - flushed at the instance's flush
rate: measured on this host (``host check --measure-flush``, kept in
``<state_path>/host-flush-rates.json``) or recorded in the layout
(``flush_rate_mib_s``). nova's drain budgets
(``[os_brick_cas_nova] live_migration_drain_timeout``,
``snapshot_drain_timeout``) below it mean a drain can run out of time.
"""

import dataclasses
import json
import os
import time
from typing import Optional

from oslo_config import cfg

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas.host import prep
from os_brick_cas.host import sizing
from os_brick_cas.opencas import casadm_output
from os_brick_cas import opts
from os_brick_cas import shared_files

CONF = cfg.CONF
RATES_FILE = 'host-flush-rates.json'
#: a flush of less than this says little about the rate
MIN_MEASURED_BYTES = 4 * sizing.MIB
NOVA_BUDGETS = ('live_migration_drain_timeout', 'snapshot_drain_timeout')


@dataclasses.dataclass(frozen=True)
class Prediction:
    """Worst-case drain time of one wb/wo instance."""

    cache_id: int
    mode: str
    cache_bytes: Optional[int]
    dirty_ratio_pct: Optional[int]
    rate_mib_s: Optional[float]
    rate_source: str

    @property
    def worst_dirty_bytes(self) -> Optional[int]:
        if self.cache_bytes is None:
            return None
        return sizing.worst_dirty_bytes(self.cache_bytes,
                                        self.dirty_ratio_pct)

    @property
    def seconds(self) -> Optional[float]:
        if self.worst_dirty_bytes is None or not self.rate_mib_s:
            return None
        return sizing.drain_seconds(self.worst_dirty_bytes, self.rate_mib_s)

    def __str__(self) -> str:
        cap = ('dirty-ratio trigger %d %%' % self.dirty_ratio_pct
               if self.dirty_ratio_pct is not None else
               'no dirty-ratio cap: the whole cache may be dirty')
        if self.cache_bytes is None:
            return ('instance %d (%s): cache size unknown, drain time not '
                    'predicted' % (self.cache_id, self.mode))
        if self.seconds is None:
            return ('instance %d (%s): up to %s dirty (%s); no flush rate '
                    'known: run "os-brick-cas host check --measure-flush" '
                    'under write load or record flush_rate_mib_s in the '
                    'layout' % (self.cache_id, self.mode,
                                sizing.human(self.worst_dirty_bytes), cap))
        return ('instance %d (%s): worst-case drain %.0f s: up to %s dirty '
                '(%s) at %.1f MiB/s (%s)' % (
                    self.cache_id, self.mode, self.seconds,
                    sizing.human(self.worst_dirty_bytes), cap,
                    self.rate_mib_s, self.rate_source))


def _rates_path(conf: cfg.ConfigOpts) -> str:
    return os.path.join(conf[opts.GROUP].state_path, RATES_FILE)


def measured_rates(conf: cfg.ConfigOpts = CONF) -> dict[int, dict]:
    """Flush rates measured on this host, per cache id."""
    try:
        with open(_rates_path(conf)) as rates:
            return {int(key): value for key, value in json.load(rates).items()}
    except (OSError, ValueError):
        return {}


def _record(conf: cfg.ConfigOpts, cache_id: int, figure: dict) -> None:
    rates = measured_rates(conf)
    rates[cache_id] = figure
    path = _rates_path(conf)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # mkstemp, complete write, fsync, rename: never through a planted link
    shared_files.replace_atomically(
        os.path.dirname(path), os.path.basename(path),
        json.dumps({str(key): value for key, value in sorted(rates.items())},
                   indent=1).encode(), mode=0o644)


def measure_flush(casadm: casadm_mod.Casadm, cache_id: int,
                  conf: cfg.ConfigOpts = CONF) -> dict:
    """Flush instance *cache_id* once and record its rate.

    A flush only writes dirty data to Ceph (nothing is dropped); it needs
    some dirty data to time, so run it while guests write.
    """
    stats = casadm.stats(cache_id)
    dirty = int(float(stats.get(casadm_output.DIRTY_BLOCKS, '0') or 0))
    dirty_bytes = dirty * prep.BLOCK
    if dirty_bytes < MIN_MEASURED_BYTES:
        raise exception.CasError(
            message='instance %d holds %s of dirty data, too little to time '
                    'a flush (at least %s): measure while guests write, or '
                    'record flush_rate_mib_s in the host layout' % (
                        cache_id, sizing.human(dirty_bytes),
                        sizing.human(MIN_MEASURED_BYTES)))
    started = time.monotonic()
    casadm.flush(cache_id, None, conf[opts.GROUP].flush_timeout)
    seconds = max(time.monotonic() - started, 1e-3)
    figure = {'rate_mib_s': round(dirty_bytes / sizing.MIB / seconds, 1),
              'dirty_bytes': dirty_bytes, 'seconds': round(seconds, 3),
              'measured_at': int(time.time())}
    _record(conf, cache_id, figure)
    return figure


def _cache_bytes(casadm: casadm_mod.Casadm,
                 item: prep.InstanceState) -> Optional[int]:
    if item.running is not None:
        try:
            blocks = casadm.stats(item.running.cache_id).get(
                'Cache Size [4KiB Blocks]', '')
            return int(float(blocks)) * prep.BLOCK
        except (exception.CasError, ValueError):
            pass
    if item.size_bytes is None:
        return None
    return item.size_bytes - (item.metadata_bytes or 0)


def predict(casadm: casadm_mod.Casadm, state: prep.HostState,
            conf: cfg.ConfigOpts = CONF) -> list[Prediction]:
    """Worst-case drain of every wb/wo instance of the layout."""
    measured = measured_rates(conf)
    result = []
    for item in state.instances:
        layout = item.layout
        if not layout.mode.holds_dirty_data:
            continue
        rate, source = None, 'unknown'
        if layout.cache_id in measured:
            figure = measured[layout.cache_id]
            rate = figure.get('rate_mib_s')
            source = 'measured %s' % time.strftime(
                '%Y-%m-%d', time.gmtime(figure.get('measured_at', 0)))
        elif state.layout.flush_rate(layout):
            rate, source = state.layout.flush_rate(layout), 'layout'
        try:
            ratio = layout.dirty_ratio_pct(state.release)
        except exception.HostLayoutRefused:
            ratio = None
        result.append(Prediction(layout.cache_id, layout.mode.value,
                                 _cache_bytes(casadm, item), ratio, rate,
                                 source))
    return result


def budget_findings(predictions: list[Prediction],
                    budgets: dict[str, int]) -> list[tuple[str, str]]:
    """(level, message) per instance: WARN where a budget is too small."""
    findings = []
    for prediction in predictions:
        seconds = prediction.seconds
        if seconds is None:
            findings.append(('WARN', str(prediction)))
            continue
        short = ['[os_brick_cas_nova] %s = %d s' % (name, value)
                 for name, value in sorted(budgets.items())
                 if value < seconds]
        if short:
            findings.append(('WARN', '%s; above %s: a drain of a volume '
                             'holding that much dirty data runs out of time '
                             '(the migration or snapshot is refused, nothing '
                             'is lost). Lower dirty_ratio_threshold_pct in '
                             'the host layout, raise the budget, or drain '
                             'ahead with "os-brick-cas drain".' % (
                                 prediction, ' and '.join(short))))
        else:
            findings.append(('OK', '%s, within nova\'s drain budgets' %
                             prediction if budgets else str(prediction)))
    return findings
