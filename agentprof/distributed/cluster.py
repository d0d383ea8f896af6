"""Where partitions run: a Dask cluster (one started here with ``--workers N``, or an existing one at
``--scheduler ADDRESS``), or this process one partition at a time (streaming, bounded memory).

Dashboards are off; a local cluster listens on 127.0.0.1 only (its scheduler's health endpoint on a free port). A worker lost
mid-run has its partitions recomputed on the others (Dask's own retry); if none are left, or the scheduler
gives up on a partition, the run ends with one ``error:`` line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agentprof.errors import AgentprofError

DEFAULT_BATCH_MB = 256
"""Input megabytes per partition by default: the streaming budget's unit (see docs/PERFORMANCE.md)."""


def _dask() -> Any:
    try:
        import distributed
    except ImportError:
        raise AgentprofError("--workers and --scheduler need Dask: pip install 'agentprof[dask]'") from None
    return distributed


@contextmanager
def dask_client(workers: int | None, scheduler: str | None) -> Iterator[Any]:
    """A connected ``distributed.Client``: to ``scheduler``, or to a new local cluster of ``workers``
    processes (one thread each) on 127.0.0.1; closed (and the local cluster stopped) afterwards."""
    distributed = _dask()
    import dask

    dask.config.set({"distributed.scheduler.allowed-failures": 3, "distributed.comm.timeouts.connect": "20s"})
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise AgentprofError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        try:
            yield client
        finally:
            client.close()
        return
    if workers is None or workers < 1:
        raise AgentprofError("--workers must be at least 1")
    # no dashboard; the scheduler's own health endpoint listens on a free loopback port
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                       scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def run_parts(fn: Callable[..., Any], parts: Sequence[Any], workers: int | None, scheduler: str | None,
              **kwargs: Any) -> list[Any]:
    """``fn(part, **kwargs)`` for every part, on the cluster (or here, in order, when neither is given)."""
    if not workers and not scheduler:
        return [fn(p, **kwargs) for p in parts]
    with dask_client(workers, scheduler) as client:
        distributed = _dask()
        futures = client.map(fn, list(parts), pure=False, **kwargs)
        try:
            return client.gather(futures)
        except distributed.scheduler.KilledWorker as e:
            raise AgentprofError(f"Dask workers kept dying on a partition ({e.task}); the run stopped "
                                 "(check the workers' memory and logs)") from None
        except (OSError, distributed.comm.CommClosedError, TimeoutError) as e:
            raise AgentprofError(f"lost the Dask cluster during the run: {e}") from None
        except AgentprofError:
            raise
