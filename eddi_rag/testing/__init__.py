"""Test suites other packages can reuse (pytest and hypothesis: ``eddi-rag[testing]``)."""

from eddi_rag.testing.source_contract import SourceContract
from eddi_rag.testing.store_conformance import (
    FilterTests,
    IsolationTests,
    KeywordTests,
    PagingTests,
    SearchTests,
    StoreConformance,
    WriteTests,
)

__all__ = ["FilterTests", "IsolationTests", "KeywordTests", "PagingTests", "SearchTests", "SourceContract", "StoreConformance",
           "WriteTests"]
