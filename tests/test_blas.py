"""numpy's BLAS on EDDI_RAG_BLAS_THREADS threads in a process that runs a Runtime (issue 34: its threads spinning after
a vector search took the embedding model's cores)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import json, threadpoolctl; {before}from eddi_rag.runtime import Runtime; Runtime(); import numpy; "
         "print(json.dumps(sorted({{i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas'}})))")


def blas_threads(setting: str | None, numpy_first: bool = False) -> str:
    """BLAS's threads once numpy is loaded: after the runtime (as a start goes), or before it (``numpy_first``)."""
    env = {} if setting is None else {"EDDI_RAG_BLAS_THREADS": setting}
    probe = PROBE.format(before="import numpy; " if numpy_first else "")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "2", **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.integration
def test_a_runtime_puts_blas_on_one_thread_unless_told():
    assert blas_threads(None) == "[1]"
    assert blas_threads(None, numpy_first=True) == "[1]"
    assert blas_threads("0") == "[2]"  # left as it was (here: OPENBLAS_NUM_THREADS)


def test_a_wrong_setting_is_named():
    from eddi_rag.common import blas

    with pytest.MonkeyPatch.context() as m:
        m.setenv("EDDI_RAG_BLAS_THREADS", "many")
        with pytest.raises(ValueError, match="EDDI_RAG_BLAS_THREADS must be a whole number"):
            blas.limit_blas_threads()
