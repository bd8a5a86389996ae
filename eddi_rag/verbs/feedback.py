"""The feedback loop's doors: citation votes (cast on a chunk the voter's search can see, reviewed, exported as
CSV) and a knowledge base's saved test questions (added, re-run against their baselines, accepted, deleted).
What is kept is ``records.feedback`` / ``records.questions``; the rules a caller passes are here."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from eddi_rag.auth import Principal
from eddi_rag.common.jsonvalues import text_problem
from eddi_rag.records.feedback import Feedback, FeedbackLog, Vote
from eddi_rag.records.questions import QuestionError, TestQuestions
from eddi_rag.resource_types import ResourceNotFoundError
from eddi_rag.retrieval.access import AGENT_USERS
from eddi_rag.stores import filters
from eddi_rag.verbs.contract_types import MAX_QUERY_CHARS
from eddi_rag.verbs.documents import Documents


def _visible(documents: Documents, kb_id: str, chunk_id: str, user_id: str | None, field: str = "",
             readable: filters.Node | None = None) -> None:
    """A vote or a question may name only a chunk of the KB that ``user_id``'s search can find (and ``readable``
    allows: retrieval.access), 404 otherwise, as for a chunk that does not exist."""
    if not documents.visible(kb_id, chunk_id, user_id, readable):
        raise ResourceNotFoundError(f"{field}knowledge base {kb_id} has no chunk {chunk_id!r} you can see")


class Votes:
    def __init__(self, log: FeedbackLog, documents: Documents, may_view: Callable[[Principal, str], bool] = lambda caller, kb_id: True):
        """``may_view(caller, kb_id)``: whether a caller may view a knowledge base (Grants.may: one shared with named
        users and groups is theirs)."""
        self.log, self.documents, self.may_view = log, documents, may_view

    def record(self, tenant: str, kb_id: str, question: str, chunk_id: str, vote: Vote, source: str | None = None,
               citation: str | None = None, comment: str | None = None, user_id: str | None = None,
               readable: filters.Node | None = None) -> Feedback:
        """A thumbs up or down on a cited chunk, kept with the question that found it."""
        _visible(self.documents, kb_id, chunk_id, user_id, readable=readable)
        return self.log.record(tenant, kb_id, question, chunk_id, vote, source, citation, comment, user_id)

    def list(self, tenant: str, kb_id: str | None = None, vote: Vote | None = None, limit: int = 200,
             reviewed: bool | None = None, caller: Principal | None = None) -> builtins.list[dict[str, Any]]:
        """The tenant's votes, newest first (``reviewed=False``: not yet marked reviewed). ``caller``: who asks (None:
        every vote, in process): the votes on knowledge bases it may view, and of those that read by permissions, its
        own alone unless it edits them (a vote names a chunk, its source and the question that found it; a viewer with
        no user has none there)."""
        items = self.log.list(tenant, kb_id, vote, limit, reviewed)
        if caller is None:
            return items
        seen: dict[str, tuple[bool, bool]] = {}  # kb id: (may view it, reads everything of it)

        def shown(item: dict[str, Any]) -> bool:
            if item["kbId"] not in seen:
                try:
                    every = caller.allows("editor") or self.documents.kbs.get(item["kbId"]).audience == AGENT_USERS
                    seen[item["kbId"]] = (self.may_view(caller, item["kbId"]), every)
                except Exception:  # noqa: BLE001 - a knowledge base gone or unreadable: its votes stay its editors'
                    seen[item["kbId"]] = (caller.allows("editor"), caller.allows("editor"))
            view, every = seen[item["kbId"]]
            return view and (every or (caller.user_id is not None and item["userId"] == caller.user_id))
        return [item for item in items if shown(item)]

    def review(self, tenant: str, id: str, reviewed: bool | None = None, note: str | None = None) -> dict[str, Any]:
        return self.log.review(tenant, id, reviewed, note)

    def csv(self, tenant: str, kb_id: str | None = None, vote: Vote | None = None, caller: Principal | None = None) -> str:
        return self.log.csv(tenant, kb_id, vote, self.list(tenant, kb_id, vote, 100_000, caller=caller))


class Questions:
    def __init__(self, questions: TestQuestions, documents: Documents):
        self.questions, self.documents = questions, documents

    def add(self, tenant: str, kb_id: str, question: str, chunk_id: str | None = None,
            user_id: str | None = None, as_user: str | None = None) -> dict[str, Any]:
        """Save a test question (``chunk_id``: the chunk a vote named, which ``user_id`` must see); what it finds
        now is its baseline. ``as_user``: the user it is asked as, with that user's permissions (the group directory's
        groups); None: nobody, who reads nothing of a knowledge base that reads by permissions."""
        question = question.strip() if isinstance(question, str) else ""
        if not question:
            raise QuestionError("question is empty")
        if wrong := text_problem(question, "question"):
            raise QuestionError(wrong)
        if len(question) > MAX_QUERY_CHARS:  # (a test question is searched as a query is)
            raise QuestionError(f"question is {len(question)} characters; at most {MAX_QUERY_CHARS} are allowed")
        if chunk_id is not None:
            _visible(self.documents, kb_id, chunk_id, user_id, "$.chunkId: ")
        if as_user is not None and (not isinstance(as_user, str) or not as_user.strip() or text_problem(as_user, "asUser")):
            raise QuestionError(f"asUser: a user id, got {as_user!r}")
        return self.questions.add(tenant, kb_id, question, chunk_id, as_user.strip() if as_user else None)

    def list(self, tenant: str, kb_id: str) -> builtins.list[dict[str, Any]]:
        return self.questions.list(tenant, kb_id)

    def run(self, tenant: str, kb_id: str) -> dict[str, Any]:
        """Every saved question searched now, beside its baseline."""
        return self.questions.run(tenant, kb_id)

    def accept(self, tenant: str, kb_id: str, id: str) -> dict[str, Any]:
        return self.questions.accept(tenant, kb_id, id)

    def accept_all(self, tenant: str, kb_id: str) -> builtins.list[dict[str, Any]]:
        return self.questions.accept_all(tenant, kb_id)

    def delete(self, tenant: str, kb_id: str, id: str) -> None:
        self.questions.delete(tenant, kb_id, id)
