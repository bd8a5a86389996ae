"""numpy's BLAS on one thread in a process that serves queries (env EDDI_RAG_BLAS_THREADS, default 1; 0 leaves it
as it is). OpenBLAS runs even the small products of a vector search on every core and its threads spin after each
one, taking the cores the embedding model's next run needs: on 2 cores a query's vector search took 3.8 ms and the
embedding right after it 7.3 ms, against 1.8 and 2.3 ms with one BLAS thread (benchmarks/README.md). Set before numpy
is loaded (a start does not load it), the limit is OpenBLAS's own variable, which the process's children inherit."""

from __future__ import annotations

import os
import sys

SETTING = "EDDI_RAG_BLAS_THREADS"
_limited: object = None  # the limit in force (threadpoolctl's handle: kept so it stays)


def limit_blas_threads() -> None:
    """Limit BLAS to EDDI_RAG_BLAS_THREADS threads for the whole process, once."""
    global _limited
    raw = os.environ.get(SETTING, "1")
    if not raw.isdigit():
        raise ValueError(f"{SETTING} must be a whole number of threads (0: leave BLAS as it is), got {raw!r}")
    if _limited is None and int(raw) > 0:
        if "numpy" not in sys.modules:  # (numpy is loaded at the first store, off a start's path: OpenBLAS reads this
            os.environ["OPENBLAS_NUM_THREADS"] = raw  # when it loads; the process's children inherit it)
            _limited = raw
            return
        from threadpoolctl import threadpool_limits

        _limited = threadpool_limits(limits=int(raw), user_api="blas")
