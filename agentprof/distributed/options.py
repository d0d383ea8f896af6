"""The ``--workers`` / ``--scheduler`` options shared by ``analyze``, ``cachesim``, ``replay`` and ``report``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

WORKERS_HELP = ("Run on a local Dask cluster of N worker processes (needs agentprof[dask]); results are the same "
                "as in one process.")
SCHEDULER_HELP = "Run on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 (needs agentprof[dask])."


def cluster_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adds ``workers`` and ``scheduler`` parameters to a click command."""
    fn = click.option("--scheduler", default=None, metavar="ADDRESS", help=SCHEDULER_HELP)(fn)
    return click.option("--workers", type=click.IntRange(min=1), default=None, metavar="N", help=WORKERS_HELP)(fn)


def load(paths: tuple[str, ...], workers: int | None, scheduler: str | None, skip_bad_lines: bool = False,
         progress: bool = False) -> Any:
    """The inputs as one trace: imported on the cluster when one is asked for (then assembled here, the same
    trace as a local import), else locally. The commands that load traces here work on large arrays: numpy's
    huge-page advice is turned off for them (:mod:`agentprof.hugepages`)."""
    from agentprof.hugepages import avoid_numpy_hugepages

    avoid_numpy_hugepages()
    if workers or scheduler:
        from agentprof.distributed.run import load_partitioned

        return load_partitioned(list(paths), workers, scheduler, skip_bad_lines)
    from agentprof.importers import load_any

    return load_any(list(paths), skip_bad_lines=skip_bad_lines, progress=progress)
