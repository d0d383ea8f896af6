"""Whether numpy asks the kernel for transparent huge pages, for agentprof's own commands.

numpy advises huge pages (``madvise(MADV_HUGEPAGE)``) for every large array. Where the kernel then compacts
memory on the fault that first touches such an array (``transparent_hugepage/defrag`` = ``madvise``, the common
default) and the machine's memory is fragmented (a full page cache), the first touch of a fresh array costs
about 1 s of system time per 600 MB; with ordinary pages it costs about a quarter of that. A report on a large
kv-cache-tester corpus creates a few dozen such arrays (see docs/PERFORMANCE.md for the measurement), so the
commands that load traces (``analyze``, ``replay``, ``report``) turn the advice off. A user's own
``NUMPY_MADVISE_HUGEPAGE`` wins; a library user's process is left alone (the setting is numpy's, per process;
child processes are not affected).
"""

from __future__ import annotations

import os


def avoid_numpy_hugepages() -> bool:
    """Turn numpy's huge-page advice off for this process unless ``NUMPY_MADVISE_HUGEPAGE`` is set; whether
    it was turned off."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return False
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        try:
            from numpy.core import multiarray  # type: ignore[no-redef]
        except ImportError:
            return False
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        return False
    setter(False)
    return True
