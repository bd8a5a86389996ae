"""The one place the components are built and wired: each gets the few collaborators it uses, and
nothing receives the Runtime. The faces (REST, MCP, the CLI, the Manager UI, the adapters) call the
verbs it holds (``eddi_rag.verbs``); the methods below are the Python API's shorthands for them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from eddi_rag.auth.keys import KeyStore
from eddi_rag.auth.oidc import OidcConfig
from eddi_rag.backends.factories import EmbeddingModelFactory, EmbeddingStoreFactory
from eddi_rag.common.blas import limit_blas_threads
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.common.secrets import SecretResolver, vault_references
from eddi_rag.config import RagConfiguration
from eddi_rag.embeddings.cache import open_cache
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.jobs import IngestionQueue
from eddi_rag.ingest.pipeline import Ingestor
from eddi_rag.records.audit import AuditLog
from eddi_rag.records.feedback import FeedbackLog
from eddi_rag.records.grants import KbGrants
from eddi_rag.records.groups import GroupDirectory
from eddi_rag.records.questions import TestQuestions
from eddi_rag.records.vault import MASTER_KEY_SETTING, SecretVault, local_master_key
from eddi_rag.records.vector_collections import Collections
from eddi_rag.resources import ResourceStore
from eddi_rag.resources.variables import Variables
from eddi_rag.retrieval.generations import KbGenerations
from eddi_rag.retrieval.rerankers import RerankerFactory
from eddi_rag.retrieval.retriever import Retriever
from eddi_rag.state.schema import on_postgresql, open_state
from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import SearchHit, StoreContext
from eddi_rag.stores.ownership import StoreOwnership
from eddi_rag.verbs.access import GlobalVariables, Grants, Groups, Keys
from eddi_rag.verbs.audit import Audit
from eddi_rag.verbs.catalog import Catalog
from eddi_rag.verbs.contract import RagPipeline
from eddi_rag.verbs.documents import Documents
from eddi_rag.verbs.feedback import Questions, Votes
from eddi_rag.verbs.health import Health
from eddi_rag.verbs.ingesting import Ingesting, job_runner
from eddi_rag.verbs.knowledge_bases import KnowledgeBases, fleet_store_error
from eddi_rag.verbs.saving import Saving
from eddi_rag.verbs.schedule import SourceScheduler
from eddi_rag.verbs.sealing import Sealing
from eddi_rag.verbs.search import Search, SearchRequest
from eddi_rag.verbs.sources import SourceSync
from eddi_rag.verbs.turns import Turns
from eddi_rag.verbs.vault import Vault
from eddi_rag.verbs.vector_collections import VectorCollections
from eddi_rag.workflow.context import RagContextProvider
from eddi_rag.workflow.llm_task import LlmTaskHook
from eddi_rag.workflow.memory_kb import EmbeddingSettings, MemoryKnowledge, NotesStore, Remembering
from eddi_rag.workflow.traversal import WorkflowTraversal

DB_FILE = "eddi-rag.db"
STORES_FILE = "eddi-rag-vectors.db"  # the embedded stores' tables when the state lives on PostgreSQL


class FleetRefusedError(EddiRagError):
    """A process of a fleet cannot serve a knowledge base whose store keeps its data on one machine."""
    status = 503


PROCESS_MB = 150  # what a forked serving process adds, its knowledge bases' rows aside (bench_processes.py: ~150 MB)
CHUNK_KB = 1.0  # ... and per chunk of the embedded stores it searches (ids, filter columns, graph links: ~0.6 KB measured)


def _available_mb() -> float | None:
    """The memory the kernel says is available (Linux), in MB; None where it does not say."""
    try:
        with open("/proc/meminfo") as meminfo:
            return next(int(line.split()[1]) / 1024 for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None


class Runtime:
    def __init__(self, data_dir: str | Path | None = None, resolver: SecretResolver | None = None,
                 embedding_cache: str | None = None, outbound: OutboundPolicy | None = None,
                 state_url: str | None = None, fleet: bool = False):
        """``data_dir=None`` keeps everything in memory (tests, throwaway demos).
        ``state_url``: where the state lives (env EDDI_RAG_STATE_URL): ``postgresql://…`` for a fleet; by
        default the SQLite file in ``data_dir``. ``fleet``: this process is one of several sharing that state
        (``eddi-rag serve``/``worker`` on PostgreSQL): it refuses knowledge bases on an embedded store.
        ``embedding_cache``: ``sqlite`` (default), a ``redis://`` URL or ``none`` (env EDDI_RAG_EMBEDDING_CACHE).
        ``outbound``: which addresses web sources, httpCall RAG, providers, rerankers and store servers may reach (default: EDDI_RAG_OUTBOUND_ALLOW)."""
        limit_blas_threads()
        self.outbound = outbound or OutboundPolicy.from_env()
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.db = open_state(state_url or os.environ.get("EDDI_RAG_STATE_URL"), self.data_dir, DB_FILE)
        # the embedded stores' tables stay in SQLite, beside the state or (state on PostgreSQL) in a file of their own
        stores_db = self.db if isinstance(self.db, Database) else Database(self.data_dir / STORES_FILE if self.data_dir else ":memory:")
        self.resolver = resolver or SecretResolver()
        master = os.environ.get(MASTER_KEY_SETTING) or None
        key_file: Path | None = None  # the master key kept in the data directory (one machine, none set)
        if master is None and self.data_dir is not None and isinstance(self.db, Database):
            if (local := local_master_key(self.data_dir)) is not None:
                master, key_file = local
        secrets = SecretVault(self.db, master)
        self.resolver.use_vault(secrets.value, lambda: secrets.available)
        redact = self.resolver.redact
        self.resources = ResourceStore(self.db)
        cache = embedding_cache or os.environ.get("EDDI_RAG_EMBEDDING_CACHE")
        self.embeddings = EmbeddingModelFactory(open_cache(cache, self.db), self.resolver, self.outbound)
        self.stores = EmbeddingStoreFactory(StoreContext(stores_db, self.data_dir), self.resolver, self.outbound,
                                            StoreOwnership(self.db))
        self.generations = KbGenerations(self.db)
        self.ingestor = Ingestor(self.embeddings, self.stores, on_change=self.generations.bump)
        self.retriever = Retriever(self.embeddings, self.stores, RerankerFactory(self.resolver, self.outbound))
        variables = Variables(self.db)
        self.knowledge_bases = KnowledgeBases(self.resources, self.data_dir, variables, fleet)
        self.jobs = IngestionQueue(self.db, job_runner(self.knowledge_bases, self.ingestor), redact)
        # the verbs
        self.documents = Documents(self.knowledge_bases, self.stores, self.generations, self.jobs.let_go)
        self.catalog = Catalog(self.resources, self.knowledge_bases)
        self.saving = Saving(self.resources, self.knowledge_bases, self.documents, self.jobs, sealing=Sealing(secrets))
        directory = GroupDirectory(self.db)
        self.groups = Groups(directory)  # the groups of a user named by a caller acting for users
        self.grants = Grants(KbGrants(self.db), directory)  # who may reach a knowledge base beyond tenant roles
        self.saving.may = self.grants.may  # (sharing a location another knowledge base holds needs edit rights on it)
        self.search = Search(self.knowledge_bases, self.embeddings, self.retriever, self.generations, redact,
                             groups=self.groups.of)
        self.ingesting = Ingesting(self.knowledge_bases, self.ingestor, self.jobs, redact, self.documents.seen)
        self.health = Health(self.knowledge_bases, self.stores, self.resources, self.embeddings, self.resolver, self.jobs.failing,
                             lambda: self.keys.any() or OidcConfig.from_env() is not None, lambda kb_id: self.sources.problems(kb_id))
        self.search.explained = self.health.explained
        self.audit = Audit(AuditLog(self.db))  # every retrieval and administrative action, chained (records.audit)
        self.search.audit = self.audit.log
        self.saving.record = self.groups.record = self.documents.record = self.audit.record
        self.remembering = Remembering()  # remember_conversations() turns it on
        self.traversal = WorkflowTraversal(self.resources, self.knowledge_bases.resolve_embedding)
        def ungranted(agent_id: str, config: RagConfiguration) -> list[str]:
            groups = (config.embeddingParameters, config.storeParameters, config.rerankerParameters)
            return [ref for tenant, key, ref in vault_references(groups, config.tenant) if not secrets.granted(tenant, key, agent_id)]

        self.llm_task = LlmTaskHook(self.traversal, RagContextProvider(self.retriever, self.search.in_turn, redact, ungranted),
                                    lambda: self.outbound.client(timeout=10), self.remembering.knowledge_bases,
                                    self.resolver.resolve)
        self.turns = Turns(self.traversal, self.llm_task, self.knowledge_bases, self.remembering)
        self.pipeline = RagPipeline(self.search, self.ingesting)
        # the rest of the state
        self.notes = NotesStore(self.db)
        self.sources = SourceSync(self.db, self.knowledge_bases, self.ingestor, self.documents, self.outbound, redact, self.resolver,
                                  directory)
        self.saving.source_removed = self.sources.forget_source
        self.saving.kb_gone = self.grants.forget
        self.saving.rechunk = self.ingesting.reparse_all
        self.saving.relabel = self.ingesting.relabel
        self.saving.claim_existing()
        self.scheduler = SourceScheduler(self.knowledge_bases, self.sources, self.db, retention=self.audit.retain)
        self.collections = VectorCollections(Collections(self.db, self.stores))
        self.keys = Keys(KeyStore(self.db))
        self.variables = GlobalVariables(variables)
        self.vault = Vault(secrets, key_file)
        self.keys.record = self.vault.record = self.sources.record = self.turns.record = self.audit.record
        self.feedback = Votes(FeedbackLog(self.db), self.documents, lambda caller, kb_id: self.grants.may(caller, kb_id, "VIEW"))
        self.questions = Questions(TestQuestions(self.db, self.search.found, lambda kb_id: self.knowledge_bases.version(kb_id, 0)), self.documents)

    @classmethod
    def serving(cls, data_dir: str | Path | None, state_url: str | None, outbound: OutboundPolicy | None = None) -> Runtime:
        """The Runtime of a serve or worker process: with the state on PostgreSQL, one of a fleet, which refuses to
        start (FleetRefusedError) while a knowledge base lives on a store the fleet's other machines cannot reach."""
        fleet = on_postgresql(state_url)
        runtime = cls(data_dir, state_url=state_url, fleet=fleet, outbound=outbound)
        if problems := runtime.fleet_problems():
            runtime.close()
            raise FleetRefusedError("refusing to start as part of a fleet (the state is on PostgreSQL):\n  "
                                    + "\n  ".join(problems) + "\nmove them to a store server (export, then import with "
                                    "another storeType), or serve them from one process on SQLite")
        return runtime

    # -- the life cycle a face runs ----------------------------------------------------------------

    def start_work(self) -> None:
        """Run ingestion jobs, source runs and the scheduler in this process (serve with its worker, or a worker)."""
        self.jobs.start()
        self.scheduler.start()

    def stop_work(self) -> None:
        """At shutdown: the scheduler's role released, a running job given back for the next worker, source runs
        under way CANCELLED, graphs built in memory saved."""
        self.scheduler.stop()
        self.sources.close()
        self.jobs.stop()
        self.stores.context.close()

    def readiness(self, role: str) -> tuple[bool, dict[str, Any]]:
        """Whether this process may be sent work (``/health/ready``): it reaches the state database, and, unless
        it only serves, its worker runs."""
        body: dict[str, Any] = {"role": role, "state": self.db.dialect, "worker": self.jobs.working(),
                                "scheduler": self.scheduler.leading}
        try:
            self.db.query("SELECT 1")
        except Exception as e:  # noqa: BLE001 - whatever keeps the state out of reach, the process is not ready
            return False, {**body, "status": "unavailable", "error": f"state database: {self.resolver.redact(str(e))}"}
        if role != "serve" and not self.jobs.working():  # (a worker, or serve with its worker)
            return False, {**body, "status": "unavailable", "error": "the ingestion worker is not running"}
        return True, {**body, "status": "ready"}

    def state_dialect(self) -> str:
        return self.db.dialect

    def fleet_problems(self) -> list[str]:
        """The knowledge bases the machines of a fleet sharing the state cannot serve (their store keeps its data on one
        machine), one line each."""
        if not self.knowledge_bases.fleet:
            return []
        problems = []
        for kb_id in self.resources.ids("rags"):
            store_type = self._store_type(kb_id)
            if store_type and (problem := fleet_store_error(store_type)):
                problems.append(f"knowledge base {kb_id!r}: {problem}")
        return problems

    def processes_to_serve(self) -> tuple[int, str]:
        """How many serving processes ``serve`` starts unless told (``--processes auto``), and why: one per core the
        process may run on, fewer when the memory available would not hold them (a forked process adds about
        ``PROCESS_MB`` and ``CHUNK_KB`` per chunk of the embedded stores: ``bench_processes.py``)."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        if cores == 1:
            return 1, "one core"
        each = PROCESS_MB + CHUNK_KB * self._embedded_chunks() / 1024
        available = _available_mb()
        fit = cores if available is None else max(1, min(cores, int(available // each)))
        if fit < cores:
            return fit, f"{cores} cores; {available:,.0f} MB available holds {fit} at about {each:,.0f} MB each beyond what they share"
        # (what each adds to the pages they share, the model and the mapped vectors: ps shows more, counting those in each)
        return cores, f"one per core, each about {each:,.0f} MB beyond what they share"

    def _store_type(self, kb_id: str) -> str | None:
        """The store type of knowledge base ``kb_id``; None for an invalid configuration (the doctor's to report)."""
        try:
            return self.knowledge_bases.get(kb_id).storeType
        except Exception:  # noqa: BLE001 - an invalid one is the doctor's to report
            return None

    def _embedded_chunks(self) -> int:
        """Chunks in the application's SQLite file (0 where there is none)."""
        try:
            return int(self.stores.context.db.query("SELECT COUNT(*) FROM kb_chunks")[0][0])
        except Exception:  # noqa: BLE001 - no such table yet, or no embedded store
            return 0

    # -- the Python API's shorthands -------------------------------------------------------------

    def validate_rag(self, data: Any) -> RagConfiguration:
        return self.knowledge_bases.validate(data)

    def rag_config(self, kb_id: str, version: int = 0) -> RagConfiguration:
        return self.knowledge_bases.get(kb_id, version)

    def ingest(self, kb_id: str, document: str, text: str, version: int = 0, **options: Any) -> int:
        """Ingest a text now; returns its chunk count (the REST API queues jobs instead)."""
        return self.ingesting.text(kb_id, document, text, version, **options)

    def ingest_file(self, kb_id: str, document: str, data: bytes, content_type: str | None = None,
                    version: int = 0, **options: Any) -> int:
        """Ingest a file now (its type detected from the bytes, ``content_type`` and ``document``'s extension)."""
        return self.ingesting.file(kb_id, document, data, content_type, version, **options)

    def query(self, kb_id: str, query: str, max_results: int | None = None, min_score: float | None = None,
              where: dict[str, Any] | None = None, user_id: str | None = None) -> list[SearchHit]:
        return self.search.hits(SearchRequest(kb_id, query, k=max_results, min_score=min_score, where=where, user_id=user_id))

    def turn(self, agent_id: str, message: str, user_id: str | None = None, task: str | None = None,
             chat_model: Any = None, tenant: str | None = None, **memory: Any) -> dict[str, Any]:
        return self.turns.turn(agent_id, message, user_id, task, chat_model, tenant, **memory)

    # -- wiring that changes while running ----------------------------------------------------

    def remember_conversations(self, embedding: EmbeddingSettings, **options: Any) -> MemoryKnowledge:
        """Make saved turns and notes searchable (REQ-EMB-005): the returned callback embeds what the
        notes store and every ConversationMemory of ``turn`` save into the agent's memory KB
        (``options``: MemoryKnowledge's name, per, store_type). Give it to your own
        ConversationMemory as ``on_save``."""
        self.remembering.close()
        self.remembering.current = MemoryKnowledge(self.resources, self.knowledge_bases.get, self.saving.create, self.ingesting.batch,
                                                   embedding, **options)
        self.notes.on_save = self.remembering.current
        return self.remembering.current

    @property
    def memory_knowledge(self) -> MemoryKnowledge | None:
        return self.remembering.current

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.remembering.close()
        self.stop_work()
        self.ingestor.close()
        if self.stores.context.db is not self.db:
            self.stores.context.db.close()
        self.db.close()
