"""Running agentprof's stages on a Dask cluster, or in bounded memory on one machine.

Inputs are cut into *units* (the files one import reads together: a Claude Code session with its sub-agents,
one kv-cache-tester trace, an OpenHands run folder), units are assigned to partitions by a stable hash of
their key (:mod:`agentprof.distributed.partition`), each partition is imported and analyzed where it runs, and
the per-partition results are merged exactly (:mod:`agentprof.distributed.analysis_merge`). ``dask`` and
``distributed`` are an optional extra: ``pip install 'agentprof[dask]'``.
"""
