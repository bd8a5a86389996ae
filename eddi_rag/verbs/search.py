"""Searching one knowledge base: one ``SearchRequest`` in, scored chunks and the passages that reach
the model out. ``retrieve`` is the retrieve contract over it: chunks above ``min_relevance`` (none
when their average is below it), answered from a 5-minute cache for the same request; any write to
the knowledge base (ingest, delete, purge, drop) or a new configuration version invalidates it,
across processes sharing the data directory."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from cachetools import TTLCache

from eddi_rag.backends.factories import EmbeddingModelFactory
from eddi_rag.common import telemetry
from eddi_rag.common.jsonvalues import text_problem
from eddi_rag.common.principals import DENY
from eddi_rag.config import RagConfiguration
from eddi_rag.records.audit import ACTING, AuditLog, digest, unwritten
from eddi_rag.retrieval import access, marks
from eddi_rag.retrieval.access import Access, Reader, WithheldError
from eddi_rag.retrieval.expansion import Passage
from eddi_rag.retrieval.generations import KbGenerations
from eddi_rag.retrieval.retriever import Hits, Retriever, order_rule
from eddi_rag.stores import filters
from eddi_rag.stores.base import SearchHit, StoreUnavailableError
from eddi_rag.verbs.contract_types import MAX_QUERY_CHARS, RESULT_TTL_SECONDS, InvalidQueryError, RAGContext, RetrievedChunk, VectorDBUnavailableError
from eddi_rag.verbs.knowledge_bases import KnowledgeBases

MODES = ("vector", "keyword", "hybrid", "rrf", "weighted")  # rrf, weighted: hybrid fused so
EXPANSIONS = ("none", "neighbors", "section")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchRequest:
    """What to search for. A default (None) takes the knowledge base's own setting."""

    kb_id: str
    query: str = ""  # the text (keyword search and rerankers need it); may be "" when ``vector`` is given in vector mode
    vector: list[float] | None = None  # the query's embedding, when the caller already has it
    k: int | None = None  # maxResults
    min_score: float | None = None  # minScore, 0..1 ((cosine + 1) / 2)
    where: dict[str, Any] | None = None  # a metadata filter
    user_id: str | None = None  # shared chunks and this user's own
    reader: Reader | None = None  # whose permissions it reads with (retrieval.access); None: user_id's, groups from the directory
    expansion: str | None = None  # contextExpansion: none, neighbors, section
    max_context_chars: int | None = None  # the passages grow within this budget
    mode: str | None = None  # searchMode: vector, keyword, hybrid (the KB's fusion), rrf or weighted (hybrid fused so)

    def problems(self) -> list[str]:
        """What is wrong with the request itself, each naming its field."""
        wrong = []
        text = self.query if isinstance(self.query, str) else None
        if text is None:
            wrong.append(f"query must be a string, got {type(self.query).__name__}")
        elif not text.strip() and self.vector is None:
            wrong.append("query is empty")
        elif len(text) > MAX_QUERY_CHARS:
            wrong.append(f"query is {len(text)} characters; at most {MAX_QUERY_CHARS} are allowed")
        elif problem := text_problem(text, "query"):  # (as REST refuses it: a lone surrogate no engine can read)
            wrong.append(problem)
        if self.k is not None and self.k < 1:
            wrong.append(f"k (maxResults) must be at least 1, got {self.k}")
        if self.min_score is not None and not 0 <= self.min_score <= 1:
            wrong.append(f"minScore must be within [0, 1], got {self.min_score}")
        if self.max_context_chars is not None and self.max_context_chars < 1:
            wrong.append(f"maxContextChars must be at least 1, got {self.max_context_chars}")
        if self.mode is not None and self.mode not in MODES:
            wrong.append(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.expansion is not None and self.expansion not in EXPANSIONS:
            wrong.append(f"contextExpansion {self.expansion!r} is not one of {', '.join(EXPANSIONS)}")
        return wrong


@dataclass
class SearchResult:
    request: SearchRequest
    config: RagConfiguration
    hits: list[SearchHit]  # best first
    passages: list[Passage] = field(default_factory=list)  # one per document, ordered by their best hit

    def to_json(self, marked: bool = False) -> dict[str, Any]:
        """The REST answer; ``marked``: each hit with a passage also says which of its sentences match the question
        best (``matchOffsets``, ``[start, end)`` in the passage; about 2 ms a hit: pysbd and a small BM25 index)."""
        of = {h.id: p for p in self.passages for h in p.hits}

        def result(h: SearchHit) -> dict[str, Any]:
            p = of.get(h.id)
            if p is None:
                return {**h.to_json(), "passage": None}
            offsets = p.offsets_of(h.id)
            found = {**h.to_json(), "passage": p.text, "passageCitation": p.label, "offsets": offsets}
            if marked:
                found["matchOffsets"] = marks.matching(p.text, offsets[0], offsets[1], self.request.query) if offsets else []
            return found

        return {"kbId": self.request.kb_id, "name": self.config.name, "query": self.request.query,
                "contextExpansion": self.request.expansion or self.config.contextExpansion,
                "order": order_rule(self.config),
                "results": [result(h) for h in self.hits],
                "passages": [p.to_json() for p in self.passages]}


class Search:
    def __init__(self, kbs: KnowledgeBases, embeddings: EmbeddingModelFactory, retriever: Retriever,
                 generations: KbGenerations, redact: Callable[[str], str] = lambda s: s,
                 ttl_seconds: float = RESULT_TTL_SECONDS, timer: Callable[[], float] = time.monotonic,
                 groups: Callable[[str, str], Sequence[str]] = lambda tenant, user: ()):
        """``groups(tenant, user)``: the group directory's groups of a user (a reader named by a caller acting for
        users: retrieval.access)."""
        self.kbs, self.embeddings, self.retriever, self.generations, self.redact = kbs, embeddings, retriever, generations, redact
        self.groups = groups
        self.audit: AuditLog | None = None  # where each retrieval is recorded (records.audit; given by the runtime)
        self._cache: TTLCache = TTLCache(1024, ttl_seconds, timer=timer)
        # a failed search explained (the health verb's ``explained``, wired in by the Runtime)
        self.explained: Callable[[str], AbstractContextManager[None]] = lambda kb_id: nullcontext()
        self._lock = threading.Lock()

    def _config(self, request: SearchRequest) -> RagConfiguration:
        if wrong := request.problems():
            raise InvalidQueryError("; ".join(wrong))
        config = self.kbs.get(request.kb_id)  # ResourceNotFoundError for an unknown KB
        if request.mode in ("rrf", "weighted"):
            config = config.model_copy(update={"searchMode": "hybrid", "fusion": request.mode})
        elif request.mode is not None:
            config = config.model_copy(update={"searchMode": request.mode})
        reranked = config.reranker != "none"
        if not request.query.strip() and (config.searchMode != "vector" or reranked):
            raise InvalidQueryError(f"query is empty; searchMode {config.searchMode!r}"
                                    f"{' with a reranker' if reranked else ''} needs its text")
        return config

    def access(self, request_kb: str, config: RagConfiguration, reader: Reader) -> Access:
        """What ``reader`` may read of the knowledge base (WithheldError: nothing)."""
        return access.access(request_kb, config.audience, config.aclMode, config.owner, reader,
                             lambda user: self.groups(config.tenant, user))

    def readable(self, kb_id: str, reader: Reader) -> filters.Node | None:
        """The filter of what ``reader`` may read of the knowledge base (None: all of it; WithheldError: nothing), for
        what shows its documents, chunks and counts."""
        return self.access(kb_id, self.kbs.get(kb_id), reader).node

    def withheld(self, request: SearchRequest, got: Sequence[str]) -> list[SearchHit]:
        """What the knowledge base's audience withholds from ``request``'s reader for its question: the hits of the same
        search read by everyone that are not among ``got`` (the reader's); for an administrator's Try it "as" a user."""
        config = self._config(request)
        if config.audience == access.AGENT_USERS:
            return []
        mine = set(got)
        return [h for h in self._hits(request, config, readable=access.EVERYONE) if h.id not in mine]

    def as_user(self, request: SearchRequest, got: Sequence[str], known: Callable[[str], bool]) -> dict[str, Any]:
        """What an administrator's Try it "as" a user shows beside the user's results: who the user is to this knowledge
        base (``known``: whether any key, grant or the group directory names the user; a misspelt name is a user with
        no groups), the principals it reads with, and one row per withheld document with the rule that withheld it."""
        config, reader = self._config(request), self._reader(request)
        try:
            principals = list(self.access(request.kb_id, config, reader).principals)
        except access.WithheldError:
            principals = list(reader.principals(self.groups(config.tenant, reader.user) if reader.user else ()))
        rows: dict[str, dict[str, Any]] = {}
        for hit in self.withheld(request, got):
            document = str(hit.metadata.get("document_id") or hit.id)
            row = rows.setdefault(document, {"documentId": document, "source": hit.metadata.get("source"),
                                             "acl": hit.metadata.get(access.ACL), "chunks": 0,
                                             "rule": withheld_by(config.audience, config.owner, hit.metadata.get(access.ACL), principals)})
            row["chunks"] += 1
        return {"user": reader.user, "known": reader.user is not None and known(reader.user), "principals": principals,
                "withheld": list(rows.values())}

    def _reader(self, request: SearchRequest) -> Reader:
        return request.reader if request.reader is not None else Reader(request.user_id)

    def hits(self, request: SearchRequest) -> list[SearchHit]:
        """The scored chunks alone (no passages)."""
        config = self._config(request)
        return self._hits(request, config)

    def _hits(self, request: SearchRequest, config: RagConfiguration, min_score: float | None = None,
              readable: Access | None = None) -> Hits:
        try:
            readable = readable if readable is not None else self.access(request.kb_id, config, self._reader(request))
        except WithheldError as e:
            self._record(request, config, None, str(e))
            raise
        with telemetry.retrieval(request.kb_id, request.k or config.maxResults) as span:  # (opt-in: common.telemetry)
            hits = self.retriever.search(request.kb_id, config, request.query, k=request.k,
                                         min_score=request.min_score if min_score is None else min_score,
                                         where=request.where, user_id=request.user_id, vector=request.vector, access=readable)
            telemetry.documents(span, hits)
        hits.audit = self._record(request, config, hits)  # (the entry's seq: a turn's rag:trace names it)
        return hits

    def _record(self, request: SearchRequest, config: RagConfiguration, hits: Hits | None, refused: str | None = None) -> int | None:
        """The audit record's entry of this retrieval (records.audit), written before its answer leaves: which chunks of
        which document versions were given, read under which ACL, to whom; how many enforcing withholds (warn mode).
        A record that cannot be written refuses the retrieval (``EDDI_RAG_AUDIT_FAIL``: ``closed``, the default, or
        ``open``: served, and logged)."""
        if self.audit is None:
            return None
        reader = self._reader(request)
        documents: dict[str, dict[str, Any]] = {}
        for h in hits or []:
            doc = documents.setdefault(str(h.metadata.get("document_id") or h.id), {
                "document": str(h.metadata.get("document_id") or h.id), "source": h.metadata.get("source"),
                "version": h.metadata.get("ingestedAt"), "acl": h.metadata.get(access.ACL), "chunks": []})
            doc["chunks"].append({"id": h.id, "score": round(h.score, 6)})
        try:
            kept = self.audit.settings(config.tenant)["effective"]["auditQueries"]  # (the tenant's auditQueries)
            detail: dict[str, Any] = {
                "kb": request.kb_id, "kbVersion": config.stored_version or self.kbs.resources.current_version("rags", request.kb_id),
                **({"query": digest(request.query)} if kept == "digest" else {}),
                "reader": reader.user, "principals": list(hits.access.principals) if hits is not None else [],
                "documents": list(documents.values())}
            if hits is not None and hits.would_withhold:
                detail["withheld"] = len(hits.would_withhold)
            if refused is not None:
                detail["refused"] = refused
            detail.update(ACTING.get().about)  # (a turn's agent, conversation and task)
            return int(self.audit.append(config.tenant, "retrieval", request.kb_id, detail,
                                         erasable={"query": request.query} if kept == "full" else None)["seq"])  # (query: a salted digest)
        except Exception as e:  # noqa: BLE001 - a record that cannot be written: closed (refused) unless told open
            unwritten(f"knowledge base {request.kb_id!r}", e)
            return None

    def in_turn(self, kb_id: str, config: RagConfiguration, query: str, vector: list[float] | None, k: int,
                min_score: float, user_id: str | None, reader: Reader | None = None) -> Hits:
        """A knowledge base searched for an LLM task's turn (the LlmTask hook, which embedded ``query`` once per model
        for every KB of the turn): ``config`` is the version the agent's workflow names, resolved. The request passes
        the same checks as every search, and a failure that is not its own comes with the doctor's reason and fix
        (``explained``), as on REST."""
        # (a turn's text may be a long message, or a topic that grew: its start is what a model embeds anyway)
        request = SearchRequest(kb_id, query[:MAX_QUERY_CHARS], vector, k=k, min_score=min_score, user_id=user_id,
                                reader=reader)
        if wrong := request.problems():
            raise InvalidQueryError("; ".join(wrong))
        with self.explained(kb_id):
            return self._hits(request, config)

    def run(self, request: SearchRequest, readable: Access | None = None) -> SearchResult:
        """Scored chunks and the passages that reach the model for them (``readable``: default what the request's
        reader may read)."""
        config = self._config(request)
        hits = self._hits(request, config, readable=readable)
        passages = self.retriever.passages(request.kb_id, config, hits, request.expansion, request.user_id,
                                           request.max_context_chars, hits.access)
        return SearchResult(request, config, hits, passages)

    def found(self, kb_id: str, question: str, as_user: str | None = None) -> list[dict[str, Any]]:
        """What a search of ``question`` finds now, passage by passage: {citation, document, chunks, hits, text}, read
        as ``as_user`` (with the group directory's groups; None: nobody) as that user's own search reads (test questions:
        of a knowledge base that reads by permissions, a question asked as nobody finds nothing)."""
        try:
            result = self.run(SearchRequest(kb_id, question, user_id=as_user,
                                            reader=Reader(as_user) if as_user is not None else access.NOBODY))
        except access.WithheldError:
            return []
        return [{"citation": p.label, "document": p.best.metadata.get("document_id"),
                 "chunks": [c.id for c in p.chunks] or [h.id for h in p.hits], "hits": [h.id for h in p.hits],
                 "text": p.text or p.best.text} for p in result.passages]

    def retrieve(self, request: SearchRequest, min_relevance: float = 0.6) -> RAGContext:
        """The retrieve contract: ``request.k`` chunks (default 5) searched without a score floor; kept
        when their average reaches ``min_relevance``, each above it. Cached (see the module doc)."""
        if not 0 <= min_relevance <= 1:
            raise InvalidQueryError(f"minRelevance must be within [0, 1], got {min_relevance}")
        request = replace(request, k=5 if request.k is None else request.k, min_score=0.0)
        config = self._config(request)
        readable = self.access(request.kb_id, config, self._reader(request))  # (before the cache: a withheld reader gets nothing)
        shown = {**config.to_json(), "disabled": config.embedding_disabled}
        key = (request.kb_id, self.generations.get(request.kb_id), json.dumps(shown, sort_keys=True, default=str),
               json.dumps([request.query, request.vector, request.k, request.where, request.user_id, request.expansion],
                          sort_keys=True), min_relevance, readable.principals)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return replace(hit, cached=True)
        if request.vector is None:
            request = replace(request, vector=self.embeddings.for_config(config).embed_query(request.query))
        try:
            hits = self._hits(request, config, readable=readable)
            avg = sum(h.score for h in hits) / len(hits) if hits else 0.0
            meets = bool(hits) and avg >= min_relevance
            kept = [h for h in hits if meets and h.score >= min_relevance]
            passages = self.retriever.passages(request.kb_id, config, kept, request.expansion, request.user_id,
                                               access=readable)
        except (ValueError, WithheldError):
            raise  # a bad filter or a dimension mismatch: the request's or the configuration's fault
        except StoreUnavailableError as e:
            raise VectorDBUnavailableError(str(e)) from e
        except Exception as e:  # noqa: BLE001 - the engine is down, refused us, or timed out
            raise VectorDBUnavailableError(self.redact(
                f"knowledge base {request.kb_id!r}: {config.storeType} store unavailable: {type(e).__name__}: {e}")) from e
        text_of = {h.id: p.text for p in passages for h in p.hits}
        chunks = [RetrievedChunk(h.id, h.text, round(h.score, 6), h.metadata.get("position_in_doc"), h.metadata,
                                 text_of.get(h.id)) for h in kept]
        result = RAGContext(uuid.uuid4().hex, uuid.uuid4().hex, request.kb_id, request.query, chunks, round(avg, 6), meets)
        with self._lock:
            self._cache[key] = result
        return result


def withheld_by(audience: str, owner: str | None, acl: Any, principals: Sequence[str]) -> str:
    """The rule that keeps a chunk from a reader holding ``principals``, said as its ACL says it."""
    if audience == access.OWNER:
        return f"audience OWNER: read by {owner} alone"
    entries = [str(a) for a in acl] if isinstance(acl, list) else []
    if denied := [a for a in entries if a.startswith(DENY) and a[len(DENY):] in principals]:
        return denied[0]
    readers = [a for a in entries if not a.startswith(DENY)]
    return f"none of its readers ({', '.join(readers)}) is the user's" if readers else "it has no readers (no acl)"

