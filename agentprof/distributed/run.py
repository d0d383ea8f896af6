"""Entry points the CLI calls: a partitioned ``analyze``, and a partitioned import for the stages that need
the whole corpus in one place (the cache simulation and the replay's prefix cache couple every session)."""

from __future__ import annotations

from agentprof.analysis.result import Analysis
from agentprof.distributed.analysis_merge import analyze_partition, merge
from agentprof.distributed.cluster import DEFAULT_BATCH_MB, run_parts
from agentprof.distributed.load import Hashing, assemble, import_units
from agentprof.distributed.partition import Unit, count_for, partitions, units
from agentprof.errors import AgentprofError
from agentprof.importers import ImportContext
from agentprof.trace.schema import Trace


def _units(paths: list[str]) -> tuple[list[Unit], list[dict]]:
    ctx = ImportContext()
    found = units(paths, ctx=ctx)
    if not found:
        raise AgentprofError(f"no trace files found in {', '.join(paths)}")
    return found, [d.to_dict() for d in ctx.flush()]


def analyze_partitioned(paths: list[str], workers: int | None = None, scheduler: str | None = None,
                        batch_mb: float = DEFAULT_BATCH_MB, skip_bad_lines: bool = False) -> Analysis:
    """``analyze`` over partitions of the inputs: on a Dask cluster, or one after another in this process
    (then peak memory follows the largest partition, about ``batch_mb`` of input, not the corpus)."""
    found, diags = _units(paths)
    n = count_for(found, workers or (1 if scheduler is None else 2), int(batch_mb * 2**20))
    parts = partitions(found, n)
    results = run_parts(analyze_partition, parts, workers, scheduler, given=paths, skip_bad_lines=skip_bad_lines)
    rank = {f: u.rank for u in found for f in u.files}
    return merge(results, paths, rank, diags)


def load_partitioned(paths: list[str], workers: int | None = None, scheduler: str | None = None,
                     skip_bad_lines: bool = False) -> Trace:
    """The inputs imported on the cluster and assembled here: the same trace ``load_any`` gives."""
    found, _ = _units(paths)
    parts = partitions(found, count_for(found, workers or 2, DEFAULT_BATCH_MB * 2**20))
    pieces: list = []
    hashing = Hashing()
    for ps, h in run_parts(import_units, parts, workers, scheduler, skip_bad_lines=skip_bad_lines):
        pieces.extend(ps)
        hashing.add(h)
    return assemble(pieces, paths, hashing)[0]
