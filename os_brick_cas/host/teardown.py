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

"""Taking a host's cache instances down: the reverse of ``host apply``.

:func:`stop` flushes (bounded) and stops every instance of the host layout
that runs and has no cores (or, asked to, with its cores), then drops the
opencas.conf rows of those it stopped;
:func:`forget` drops the rows of instances that no longer run once their
cache device holds no dirty Open CAS metadata. Neither ever drops dirty
data: an instance whose flush fails keeps running, listed in opencas.conf,
and its outcome says which command to run. Results are records; the CLI
(``os-brick-cas host stop|forget``) prints them and picks the exit code.
"""

import dataclasses
import os
from typing import Optional

from os_brick_cas import casadm as casadm_mod
from os_brick_cas import exception
from os_brick_cas.host import layout_file
from os_brick_cas import labels
from os_brick_cas import modes
from os_brick_cas.opencas import casadm_output
from os_brick_cas.privileged import devices as priv_devices

#: outcomes of one instance
STOPPED = 'stopped'
NOT_RUNNING = 'not-running'
FORGOTTEN = 'forgotten'
KEPT = 'kept'


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened to one instance of the layout, and why."""

    cache_id: int
    mode: str
    result: str            # STOPPED, NOT_RUNNING, FORGOTTEN or KEPT
    detail: str = ''       # for KEPT: why, and the command to run

    @property
    def kept(self) -> bool:
        return self.result == KEPT

    def __str__(self) -> str:
        text = '%s: %s' % (labels.cache_instance(self.cache_id, self.mode),
                           self.result)
        return '%s: %s' % (text, self.detail) if self.detail else text


def _running(casadm: casadm_mod.Casadm
             ) -> dict[int, casadm_output.CacheInstance]:
    """Running instances by id; none where Open CAS is not usable."""
    try:
        return {cache.cache_id: cache for cache in casadm.list_caches()}
    except (exception.CasadmNotFound, exception.CasModuleNotLoaded):
        return {}


def _holds_dirty_data(layout: layout_file.InstanceLayout,
                      cache: casadm_output.CacheInstance) -> bool:
    """Whether the layout's or the running mode can hold dirty data."""
    if layout.mode.holds_dirty_data:
        return True
    try:
        return modes.CacheMode(cache.current_mode).holds_dirty_data
    except ValueError:
        return True     # a mode this suite does not know: assume it can


def _flush_refusal(cache_id: int, mode: str, error: Exception) -> str:
    return ('flushing it failed (%s). It is left running with its dirty '
            'data and stays in opencas.conf. Check that Ceph is reachable '
            'and dmesg, run "os-brick-cas flush --all" (or "casadm '
            '--flush-cache --cache-id %d") until it succeeds, then run '
            '"os-brick-cas host stop" again. Never stop it with '
            '--no-data-flush.' % (error, cache_id))


def _cores_refusal(cache: casadm_output.CacheInstance) -> str:
    return ('%d core(s) still on it: %s. A volume attached to a server that '
            'is shut off keeps its core, and stopping the instance would '
            'leave that server unable to start until a hard reboot. Detach '
            'those volumes (or delete their servers) and run "os-brick-cas '
            'host stop" again, or run "os-brick-cas host stop --with-cores" '
            'to flush and take the cores down with the instance. Nothing '
            'was flushed or stopped.' % (
                len(cache.cores), ', '.join(
                    '%s (%s)' % (core.label, core.device)
                    for core in cache.cores)))


def _stop_one(casadm: casadm_mod.Casadm,
              layout: layout_file.InstanceLayout,
              cache: casadm_output.CacheInstance, flush_timeout: int,
              with_cores: bool) -> Outcome:
    cache_id, mode = layout.cache_id, cache.current_mode
    if cache.cores and not with_cores:
        return Outcome(cache_id, mode, KEPT, _cores_refusal(cache))
    if _holds_dirty_data(layout, cache):
        try:
            casadm.flush(cache_id, None, flush_timeout)
        except exception.CasError as exc:
            return Outcome(cache_id, mode, KEPT,
                           _flush_refusal(cache_id, mode, exc))
    try:
        # the stop flushes again whatever was written since
        casadm.stop_cache(cache_id, flush_timeout)
    except exception.CasError as exc:
        return Outcome(cache_id, mode, KEPT, (
            'stopping it failed (%s). It is left running. Volumes still '
            'attached? "os-brick-cas status" lists its cores; detach them, '
            'then run "os-brick-cas host stop" again.' % exc))
    return Outcome(cache_id, mode, STOPPED)


def stop(casadm: casadm_mod.Casadm, layout: layout_file.HostLayout,
         flush_timeout: int, with_cores: bool = False) -> list[Outcome]:
    """Flush and stop every instance of *layout* that runs.

    An instance with cores (attached volumes) is kept unless *with_cores*.
    Instances in a mode that may hold dirty data (the layout's or the
    running one) are flushed first, bounded by *flush_timeout* seconds;
    a failed flush keeps the instance running. The opencas.conf rows of
    the instances stopped are dropped so casctl does not start them at
    boot; a kept instance keeps its rows.
    """
    running = _running(casadm)
    outcomes = []
    for instance in layout.instances:
        cache = running.get(instance.cache_id)
        if cache is None:
            outcomes.append(Outcome(instance.cache_id,
                                    instance.mode.value, NOT_RUNNING))
            continue
        outcomes.append(_stop_one(casadm, instance, cache, flush_timeout,
                                  with_cores))
    stopped = [o.cache_id for o in outcomes if o.result == STOPPED]
    if stopped:
        priv_devices.forget_caches(stopped)
    return outcomes


def _metadata_refusal(casadm: casadm_mod.Casadm,
                      instance: layout_file.InstanceLayout
                      ) -> Optional[str]:
    """Why *instance*'s device must be kept, or None if nothing is lost.

    An absent device holds nothing this host could load now.
    """
    device = instance.device
    if not os.path.exists(device):
        return None
    load = ('Load it ("os-brick-cas host apply --load-existing"), then run '
            '"os-brick-cas host stop" and this command again.')
    try:
        found = casadm.cache_device_metadata(device)
    except exception.CasadmNotFound:
        return None     # no Open CAS here: nothing can load that metadata
    except exception.CasError as exc:
        return ('%s could not be checked for Open CAS metadata (%s). %s' %
                (device, exc, load))
    if found.get('Is cache', 'no').lower() != 'yes':
        return None
    if (found.get('Clean Shutdown', '').lower() == 'yes' and
            found.get('Cache dirty', '').lower() == 'no'):
        return None
    return ('%s holds Open CAS metadata with dirty data (or of an unclean '
            'shutdown, which may hold some): kept. %s' % (device, load))


def forget(casadm: casadm_mod.Casadm, layout: layout_file.HostLayout
           ) -> list[Outcome]:
    """Drop the opencas.conf rows of every layout instance that is done.

    An instance still running is kept (run :func:`stop` first), and so is
    one whose cache device holds dirty metadata (or metadata that cannot
    be checked): its data may be newer than Ceph's. The caller may then
    remove the backing devices of the FORGOTTEN instances.
    """
    running = _running(casadm)
    outcomes = []
    for instance in layout.instances:
        mode = instance.mode.value
        if instance.cache_id in running:
            outcomes.append(Outcome(instance.cache_id, mode, KEPT, (
                'it still runs; its device and opencas.conf rows are kept. '
                'Run "os-brick-cas host stop" first.')))
            continue
        refusal = _metadata_refusal(casadm, instance)
        outcomes.append(Outcome(instance.cache_id, mode, KEPT, refusal)
                        if refusal else
                        Outcome(instance.cache_id, mode, FORGOTTEN))
    done = [o.cache_id for o in outcomes if o.result == FORGOTTEN]
    if done:
        priv_devices.forget_caches(done)
    return outcomes
