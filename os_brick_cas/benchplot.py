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

"""``os-brick-cas bench --plot``: the bench results as a PNG.

Two panels: the latency percentiles (average, P99, P99.9, P99.99; log
scale) of every profile, direction and device, and the read hit ratio run
after run (``--repeat``), which shows the cache warming up. matplotlib is
an optional dependency (``pip install os-brick-cas[plot]``).
"""

from typing import Any, Optional

#: (axis label, bench.Direction attribute)
PERCENTILES = (('avg', 'avg_us'), ('P99', 'p99_us'), ('P99.9', 'p999_us'),
               ('P99.99', 'p9999_us'))


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


def require() -> None:
    """Raise PlotUnavailable unless matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise PlotUnavailable(
            'bench --plot needs matplotlib: pip install '
            '"os-brick-cas[plot]" (or python3-matplotlib)') from exc


def _base_profile(name: str) -> str:
    return name.split(' #', 1)[0]      # "randread-qd1 #2" -> "randread-qd1"


def latency_series(results: list[dict[str, Any]]
                   ) -> dict[str, list[Optional[float]]]:
    """``{"profile dir device": [avg, P99, P99.9, P99.99 µs]}`` (last run).

    An item with a ``phase`` ("cold", "warm") gets a line of its own
    ("profile phase dir device"); phase "warming" (the runs between) is
    left to the warm-up panel.
    """
    series = {}
    for item in results:
        phase = item.get('phase')
        if phase == 'warming':
            continue
        profile = _base_profile(item['profile'])
        if phase:
            profile = '%s %s' % (profile, phase)
        for direction in ('read', 'write'):
            values = item.get(direction)
            if values is None:
                continue
            key = '%s %s %s' % (profile, direction, item['device'])
            series[key] = [getattr(values, attr) for _, attr in PERCENTILES]
    return series


def warmup_series(results: list[dict[str, Any]]
                  ) -> dict[str, list[tuple[int, float]]]:
    """``{"profile device": [(run, read hit ratio)]}`` of the CAS devices."""
    series: dict[str, list[tuple[int, float]]] = {}
    for item in results:
        if item.get('read_hit_ratio') is None:
            continue
        key = '%s %s' % (_base_profile(item['profile']), item['device'])
        series.setdefault(key, []).append((item.get('run', 1),
                                           item['read_hit_ratio']))
    return series


def plot(results: list[dict[str, Any]], path: str, where: str) -> Any:
    """Draw *results* of ``run_profiles`` into the PNG *path*.

    Returns the matplotlib Figure (closed, for inspection).
    """
    require()
    import matplotlib
    matplotlib.use('Agg')              # no display on a compute node
    from matplotlib import pyplot
    from matplotlib import ticker

    figure, (latency, warmup) = pyplot.subplots(
        1, 2, figsize=(14, 6), gridspec_kw={'width_ratios': [3, 2]})
    figure.suptitle('os-brick-cas bench (4k, libaio, direct): %s' % where)
    labels = [label for label, _ in PERCENTILES]
    for name, values in sorted(latency_series(results).items()):
        points = [(x, y) for x, y in enumerate(values) if y]
        if points:
            latency.plot(*zip(*points), marker='o', label=name)
    latency.set_xticks(range(len(labels)), labels)
    latency.set_yscale('log')
    latency.set_ylabel('latency (µs, log scale)')
    latency.set_title('Latency percentiles')
    latency.grid(True, which='both', alpha=0.3)
    latency.legend(fontsize='small')
    for name, points in sorted(warmup_series(results).items()):
        runs, ratios = zip(*points)
        warmup.plot(runs, [ratio * 100 for ratio in ratios], marker='o',
                    label=name)
    warmup.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    warmup.set_xlabel('run (--repeat)')
    warmup.set_ylabel('read hit ratio (%)')
    warmup.set_ylim(0, 100)
    warmup.set_title('Read hit ratio warming up')
    warmup.grid(True, alpha=0.3)
    if warmup.get_legend_handles_labels()[0]:
        warmup.legend(fontsize='small')
    else:
        warmup.text(0.5, 0.5, 'no Open CAS device measured', ha='center',
                    transform=warmup.transAxes)
    figure.tight_layout()
    figure.savefig(path, format='png', dpi=100)
    pyplot.close(figure)
    return figure


def plot_drain(rows: list[dict[str, Any]], path: str, where: str) -> Any:
    """Drain seconds against dirty MiB at drain start, one line a policy.

    *rows*: ``{'policy', 'dirty_before' (4 KiB blocks), 'seconds'}``; every
    row is a point, the line joins the medians per written amount.
    """
    require()
    import statistics

    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 5))
    figure.suptitle('Drain time against dirty data: %s' % where,
                    fontsize='medium')
    policies: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        policies.setdefault(row['policy'], []).append(row)
    for policy, items in policies.items():
        points = [(row['dirty_before'] * 4 / 1024.0, row['seconds'])
                  for row in items]
        line, = axes.plot([], [], marker='o', label=policy)
        axes.scatter(*zip(*points), color=line.get_color(), alpha=0.4,
                     s=14)
        by_written: dict[int, list[tuple[float, float]]] = {}
        for row, point in zip(items, points):
            by_written.setdefault(row.get('written', 0), []).append(point)
        medians = sorted((statistics.median(x for x, _ in group),
                          statistics.median(y for _, y in group))
                         for group in by_written.values())
        line.set_data(*zip(*medians))
    axes.set_xlabel('dirty data at drain start (MiB)')
    axes.set_ylabel('drain time (s): IO-class load + flush')
    axes.grid(True, alpha=0.3)
    axes.legend(title='cleaning policy')
    axes.relim()
    axes.autoscale_view()
    figure.tight_layout()
    figure.savefig(path, format='png', dpi=100)
    pyplot.close(figure)
    return figure
