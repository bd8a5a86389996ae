"""Saved test questions of a knowledge base: a regression set a workflow author keeps. Each question keeps
the passages it found when it was saved or last accepted (its baseline: each passage's citation, document,
chunk ids and text); running the set after a configuration change shows which answers' passages changed, word
by word, and whether the chunk a vote named (when the question came from one) is still among them."""

from __future__ import annotations

import builtins
import difflib
import json
import re
import secrets
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

MAX_QUESTIONS = 200  # per knowledge base
Found = list[dict[str, Any]]  # [{citation, document, chunks: [ids], hits: [ids], text}], one per passage, best first


class UnknownQuestionError(EddiRagError, LookupError):
    status = 404


class QuestionError(EddiRagError, ValueError):
    status = 400


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class TestQuestions:
    __test__ = False  # (not a pytest class)

    def __init__(self, db: StateDatabase, find: Callable[[str, str, str | None], Found], version: Callable[[str], int]):
        """``find(kb_id, question, as_user)``: the passages a search finds now, read with that user's permissions (None:
        nobody's); ``version(kb_id)``: its configuration's."""
        self.db, self.find, self.version = db, find, version
        state.migrate(db)

    def add(self, tenant: str, kb_id: str, question: str, chunk_id: str | None = None, as_user: str | None = None) -> dict[str, Any]:
        """Save a question (checked by the questions verb; ``chunk_id``: the chunk a vote named; ``as_user``: whose
        permissions it is asked with) with what it finds now as its baseline."""
        count = self.db.query("SELECT COUNT(*) AS n FROM test_questions WHERE tenant=? AND kb_id=?", (tenant, kb_id))[0]["n"]
        if count >= MAX_QUESTIONS:
            raise QuestionError(f"this knowledge base keeps {count} test questions, the most it may; delete some first")
        found, now = self.find(kb_id, question, as_user), _now()
        id = secrets.token_hex(8)
        self.db.execute("INSERT INTO test_questions (id, tenant, kb_id, question, chunk_id, baseline, baseline_version, "
                        "created_on, accepted_on, as_user) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (id, tenant, kb_id, question, chunk_id, json.dumps(found), self.version(kb_id), now, now, as_user))
        return self._one(tenant, kb_id, id)

    def list(self, tenant: str, kb_id: str) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT * FROM test_questions WHERE tenant=? AND kb_id=? ORDER BY created_on, id", (tenant, kb_id))
        return [self._json(r) for r in rows]

    def delete(self, tenant: str, kb_id: str, id: str) -> None:
        if not self.db.execute("DELETE FROM test_questions WHERE tenant=? AND kb_id=? AND id=?", (tenant, kb_id, id)).rowcount:
            raise UnknownQuestionError(f"knowledge base {kb_id} has no test question {id!r}")

    def run(self, tenant: str, kb_id: str) -> dict[str, Any]:
        """Every saved question searched now: {version, results: [{id, question, changed, before, after,
        passages: [{n, citation, status: same | changed | new | gone, was?, diff?}], chunkFound?}]}."""
        results = []
        for saved in self.list(tenant, kb_id):
            after = self.find(kb_id, saved["question"], saved["asUser"])
            results.append({**compare(saved["baseline"], after), "id": saved["id"], "question": saved["question"],
                            "asUser": saved["asUser"],
                            "baselineVersion": saved["baselineVersion"],
                            **({"chunkId": saved["chunkId"], "chunkFound": any(saved["chunkId"] in p["chunks"] for p in after)}
                               if saved["chunkId"] else {})})
        return {"kbId": kb_id, "version": self.version(kb_id), "results": results,
                "changed": sum(r["changed"] for r in results)}

    def accept(self, tenant: str, kb_id: str, id: str) -> dict[str, Any]:
        """What the question finds now becomes its baseline."""
        saved = self._one(tenant, kb_id, id)
        self.db.execute("UPDATE test_questions SET baseline=?, baseline_version=?, accepted_on=? WHERE id=?",
                        (json.dumps(self.find(kb_id, saved["question"], saved["asUser"])), self.version(kb_id), _now(), id))
        return self._one(tenant, kb_id, id)

    def accept_all(self, tenant: str, kb_id: str) -> builtins.list[dict[str, Any]]:
        """What every saved question finds now becomes its baseline."""
        return [self.accept(tenant, kb_id, q["id"]) for q in self.list(tenant, kb_id)]

    def _one(self, tenant: str, kb_id: str, id: str) -> dict[str, Any]:
        rows = self.db.query("SELECT * FROM test_questions WHERE tenant=? AND kb_id=? AND id=?", (tenant, kb_id, id))
        if not rows:
            raise UnknownQuestionError(f"knowledge base {kb_id} has no test question {id!r}")
        return self._json(rows[0])

    @staticmethod
    def _json(r: Any) -> dict[str, Any]:
        return {"id": r["id"], "kbId": r["kb_id"], "question": r["question"], "chunkId": r["chunk_id"],
                "baseline": json.loads(r["baseline"]), "baselineVersion": r["baseline_version"],
                "createdOn": r["created_on"], "acceptedOn": r["accepted_on"], "asUser": r["as_user"]}


def compare(before: Found, after: Found) -> dict[str, Any]:
    """Passage by passage, what changed between two searches of one question. A passage now takes the baseline's
    passages that share a chunk with it (several, when they merged into it), else one of the same document; it is
    the same when it took one with the same chunks, and changed otherwise (``was``: the labels it replaces;
    ``diff``: their text to its own, word by word). The rest are new or gone (their whole text as ``diff``). A
    baseline kept before passage texts were has no ``diff``."""
    took: list[list[int]] = []  # for each passage now, the baseline's it replaces
    used: set[int] = set()
    for p in after:
        chunks = set(p["chunks"])
        mine = [i for i, old in enumerate(before) if i not in used and chunks & set(old["chunks"])]
        used.update(mine)
        took.append(mine)
    for n, p in enumerate(after):  # then by document, among the passages left on both sides
        i = next((i for i, old in enumerate(before) if i not in used and p.get("document") is not None
                  and old.get("document") == p["document"]), None) if not took[n] else None
        if i is not None:
            used.add(i)
            took[n] = [i]
    passages = []
    for n, (p, mine) in enumerate(zip(after, took), 1):
        at = {c: k for k, c in enumerate(p["chunks"])}  # (its chunks are in document order: the merged ones in it too)
        olds = sorted((before[i] for i in mine), key=lambda old: min((at[c] for c in old["chunks"] if c in at), default=0))
        if not olds:
            passages.append({"n": n, "citation": p["citation"], "status": "new", **_diff([], p)})
        elif len(olds) == 1 and olds[0]["chunks"] == p["chunks"]:
            passages.append({"n": n, "citation": p["citation"], "status": "same"})
        else:
            passages.append({"n": n, "citation": p["citation"], "status": "changed",
                             "was": "; ".join(dict.fromkeys(old["citation"] for old in olds)), **_diff(olds, p)})
    gone = [{"n": None, "citation": p["citation"], "status": "gone", **_diff([p], None)}
            for i, p in enumerate(before) if i not in used]
    changed = any(p["status"] != "same" for p in passages) or bool(gone) or \
        [p["chunks"] for p in before] != [p["chunks"] for p in after]
    return {"changed": changed, "before": [p["citation"] for p in before], "after": [p["citation"] for p in after],
            "passages": passages + gone}


def _diff(before: Found, after: dict[str, Any] | None) -> dict[str, Any]:
    """``{"diff": [[op, text], ...]}`` from the text of passages (one after the other) to a passage's, word by
    word: ``=`` kept, ``-`` gone, ``+`` appeared; nothing when a text was not kept."""
    texts = [p.get("text") for p in before] + ([after.get("text")] if after is not None else [])
    if any(t is None for t in texts):
        return {}
    was = "\n\n".join(t for t in texts[:len(before)] if t)
    old, new = (re.findall(r"\s+|\S+", t) for t in (was, after["text"] if after is not None else ""))
    diff: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            diff.append(["=", "".join(old[i1:i2])])
            continue
        if i2 > i1:
            diff.append(["-", "".join(old[i1:i2])])
        if j2 > j1:
            diff.append(["+", "".join(new[j1:j2])])
    return {"diff": diff}
