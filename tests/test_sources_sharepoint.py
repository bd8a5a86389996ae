"""A sharepoint source against a fake of Microsoft Graph at its HTTP boundary (tests/support/fake_graph.py: Graph's
documented JSON for tokens, sites, drives, driveItem delta, content, permissions and group members): the first run and
then deltas through the cursor (added, changed, deleted; only what changed downloaded), permissions to ACLs and a
permission change reaching the chunks at the next permission sync without reading or embedding anything, an expired
delta link relisting, throttling obeyed, a refused secret never shown."""

from __future__ import annotations

import json

import pytest

from eddi_rag.common.principals import Reader
from eddi_rag.runtime import Runtime
from eddi_rag.sources.connectors.sharepoint import acl_of
from eddi_rag.verbs.knowledge_bases import ConfigValidationError
from eddi_rag.verbs.schedule import SourceScheduler
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, FakeGraph
from tests.support.files import pdf
from tests.support.kbs import make_kb, sources_held, sources_read

pytestmark = pytest.mark.integration

HR = [{"grantedToV2": {"group": {"id": "g-hr", "displayName": "HR"}}}]
EVERYONE = [{"roles": ["read"], "link": {"scope": "organization", "type": "view"}}]


def source(graph: FakeGraph, **more) -> dict:
    return {"name": "Intranet", "type": "sharepoint", "settings": {"tombstoneAfterMissedRuns": 1},
            "sharepoint": {"tenantId": TENANT, "clientId": CLIENT_ID, "clientSecret": "${eddivault:SP_SECRET}",
                           "sites": ["contoso.sharepoint.com:/sites/hr"], "graphUrl": graph.url, "loginUrl": graph.url, **more}}


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_SP_SECRET", CLIENT_SECRET)
    with FakeGraph(page_size=2) as graph:
        site = graph.site("/sites/hr", "HR")
        drive = graph.drive(site, "Documents")
        graph.put(drive, "leave.md", b"# Leave\n\nStaff take 30 days of annual leave.\n", permissions=HR)
        graph.put(drive, "canteen.md", b"# Canteen\n\nThe canteen opens at noon.\n", permissions=EVERYONE)
        graph.put(drive, "salaries.md", b"# Salaries\n\nSalary bands rise by three percent.\n",
                  permissions=[{"grantedToV2": {"user": {"id": "u-carol"}}}])
        graph.groups["g-hr"] = ["u-alice"]
        runtime = Runtime(tmp_path / "data")
        kb = make_kb(runtime, chunkStrategy="markdown", minScore=0, audience="DOCUMENT_ACL", sources=[source(graph)])
        yield runtime, kb, graph, drive
        runtime.close()


def names(runtime: Runtime, kb: str) -> set[str]:
    return {source.rsplit("/", 1)[-1] for source in sources_held(runtime, kb)}


def read(runtime: Runtime, kb: str, user: str, query: str) -> set[str]:
    return {source.rsplit("/", 1)[-1] for source in sources_read(runtime, kb, Reader(user), query)}


def downloads(graph: FakeGraph) -> list[str]:
    return [r for r in graph.requests if r.endswith("/content")]


def test_a_drive_is_synced_then_followed_by_its_delta(world):
    runtime, kb, graph, drive = world
    first = runtime.sources.run(kb, "intranet")
    assert (first.status, first.added, first.failed) == ("COMPLETED", 3, 0), first.error
    assert names(runtime, kb) == {"leave.md", "canteen.md", "salaries.md"}
    chunk = next(c for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None) if "leave" in c.metadata["source"])
    assert chunk.metadata["source"] == "HR/Documents/leave.md"
    assert chunk.metadata["url"] == "https://contoso.sharepoint.com/sites/hr/Documents/leave.md"
    assert json.loads(runtime.sources.cursor(kb, "intranet"))["drives"][drive].endswith("token=4")

    graph.requests.clear()
    graph.put(drive, "canteen.md", b"# Canteen\n\nThe canteen opens at one o'clock.\n", permissions=EVERYONE)
    graph.put(drive, "travel.md", b"# Travel\n\nTrains are booked in second class.\n", permissions=EVERYONE)
    graph.remove(drive, "salaries.md")
    delta = runtime.sources.run(kb, "intranet")
    assert (delta.added, delta.updated, delta.deleted, delta.seen) == (1, 1, 1, 2)
    assert len(downloads(graph)) == 2  # the two that changed, nothing else read
    assert names(runtime, kb) == {"leave.md", "canteen.md", "travel.md"}
    assert "one o'clock" in " ".join(c.text for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None))

    graph.requests.clear()
    quiet = runtime.sources.run(kb, "intranet")
    assert (quiet.seen, quiet.added, quiet.updated, quiet.deleted) == (0, 0, 0, 0) and downloads(graph) == []


def test_permissions_become_acls_and_a_change_reaches_the_next_query_without_embedding(world):
    runtime, kb, graph, drive = world
    runtime.sources.run(kb, "intranet")
    runtime.sources.sync_permissions(kb, "intranet")  # alice is in g-hr, from Graph's group members
    assert runtime.groups.of("default", "u-alice") == ["g-hr"]
    assert read(runtime, kb, "u-alice", "annual leave days") >= {"leave.md"}
    assert "salaries.md" not in read(runtime, kb, "u-alice", "salary bands")
    assert "salaries.md" in read(runtime, kb, "u-carol", "salary bands")
    assert "leave.md" not in read(runtime, kb, "u-bob", "annual leave days")
    assert "canteen.md" in read(runtime, kb, "u-bob", "canteen opens")  # an organisation link: every signed-in user

    graph.requests.clear()
    graph.grant(drive, "leave.md", [{"grantedToV2": {"user": {"id": "u-bob"}}}])  # not a change of the delta
    graph.grant(drive, "salaries.md", HR)
    graph.groups["g-hr"] = ["u-alice", "u-dave"]
    synced = runtime.sources.sync_permissions(kb, "intranet")
    assert (synced.status, synced.kind, synced.updated, synced.unchanged, synced.embedded) == ("COMPLETED", "permissions", 2, 1, 0)
    assert downloads(graph) == []  # nothing read again
    assert "leave.md" in read(runtime, kb, "u-bob", "annual leave days")
    assert "leave.md" not in read(runtime, kb, "u-alice", "annual leave days")
    assert runtime.groups.of("default", "u-dave") == ["g-hr"]
    assert "salaries.md" in read(runtime, kb, "u-dave", "salary bands")
    assert runtime.sources.runs(kb, "intranet")[0]["kind"] == "permissions"

    graph.remove(drive, "canteen.md")  # gone from Graph before the next run: nobody reads it meanwhile
    gone = runtime.sources.sync_permissions(kb, "intranet")
    assert gone.updated == 1 and "canteen.md" not in read(runtime, kb, "u-bob", "canteen opens")


def test_the_scheduler_syncs_permissions_every_so_many_minutes(world):
    from datetime import datetime, timedelta, timezone

    runtime, kb, graph, drive = world
    scheduler = SourceScheduler(runtime.knowledge_bases, runtime.sources, runtime.db, interval=3600)
    now = datetime.now(timezone.utc)
    assert scheduler.due_permissions(now) == []  # nothing ingested yet: nothing to sync
    runtime.sources.run(kb, "intranet")
    assert scheduler.due_permissions(now) == [(kb, "intranet")]
    runtime.sources.sync_permissions(kb, "intranet")
    assert scheduler.due_permissions(now + timedelta(minutes=5)) == []
    assert scheduler.due_permissions(now + timedelta(minutes=16)) == [(kb, "intranet")]  # permissionSyncMinutes: 15


def test_an_expired_delta_link_relists_the_drive(world):
    runtime, kb, graph, drive = world
    runtime.sources.run(kb, "intranet")
    graph.expire_tokens()
    graph.put(drive, "travel.md", b"# Travel\n\nTrains are booked in second class.\n", permissions=EVERYONE)
    graph.requests.clear()
    again = runtime.sources.run(kb, "intranet")
    assert again.status == "COMPLETED" and "cursor was no longer valid" in again.message
    assert (again.added, again.unchanged, again.deleted) == (1, 3, 0) and len(downloads(graph)) == 1  # eTags: not read
    assert names(runtime, kb) == {"leave.md", "canteen.md", "salaries.md", "travel.md"}


def test_a_file_deleted_while_the_delta_link_had_expired_leaves_at_the_relisting(tmp_path, monkeypatch):
    """Issue 56, finding 4: after a 410 the full relisting counted the deleted file missed once (of the two complete
    runs ``tombstoneAfterMissedRuns`` waits for), and the deltas after it never named it again: it stayed searchable."""
    monkeypatch.setenv("EDDI_VAULT_SP_SECRET", CLIENT_SECRET)
    with FakeGraph(page_size=2) as graph:
        drive = graph.drive(graph.site("/sites/hr", "HR"), "Documents")
        graph.put(drive, "canteen.md", b"# Canteen\n\nThe canteen opens at noon.\n", permissions=EVERYONE)
        graph.put(drive, "salaries.md", b"# Salaries\n\nSalary bands rise by three percent.\n", permissions=EVERYONE)
        runtime = Runtime(tmp_path / "data")
        spec = source(graph)
        spec["settings"] = {}  # tombstoneAfterMissedRuns: its default, 2
        kb = make_kb(runtime, chunkStrategy="markdown", minScore=0, sources=[spec])
        runtime.sources.run(kb, "intranet")
        graph.expire_tokens()
        graph.remove(drive, "salaries.md")
        relisted = runtime.sources.run(kb, "intranet")
        assert "cursor was no longer valid" in relisted.message and relisted.deleted == 1
        assert names(runtime, kb) == {"canteen.md"}
        assert [d["name"] for d in runtime.sources.documents(kb, "intranet")] == ["HR/Documents/canteen.md"]
        assert runtime.sources.run(kb, "intranet").deleted == 0  # a delta from the new link: nothing more
        runtime.close()


def test_a_throttled_run_waits_as_graph_asks_and_finishes(world):
    runtime, kb, graph, drive = world
    graph.throttle["/v1.0/drives"] = 2  # two 429s with Retry-After: 1
    run = runtime.sources.run(kb, "intranet")
    assert (run.status, run.added) == ("COMPLETED", 3), run.error
    assert "Graph throttled the sync: 2 s" in run.message
    assert sum(1 for r in graph.requests if "/root/delta" in r) == 4  # (two refused, then two pages)


def test_a_refused_secret_fails_the_run_without_showing_it_and_bad_configurations_name_the_field(world, tmp_path, monkeypatch):
    runtime, kb, graph, drive = world
    monkeypatch.setenv("EDDI_VAULT_SP_SECRET", "wrong-secret-value")
    failed = runtime.sources.run(kb, "intranet")
    assert failed.status == "FAILED" and "refused the client credentials: HTTP 401" in failed.error
    assert "wrong-secret-value" not in json.dumps(runtime.sources.runs(kb, "intranet"))
    with pytest.raises(ConfigValidationError) as no_sites:
        make_kb(runtime, sources=[source(graph, sites=[])])
    assert "sites" in str(no_sites.value)
    with pytest.raises(ConfigValidationError) as metadata:
        make_kb(runtime, sources=[source(graph, graphUrl="http://169.254.169.254/")])
    assert metadata.value.errors[0]["path"] == "$.sources[0].sharepoint.graphUrl"
    plain = make_kb(runtime, sources=[{"name": "Web", "type": "web", "web": {"startUrl": "https://example.org/"}}])
    with pytest.raises(Exception, match="keeps no permissions of its own"):
        runtime.sources.sync_permissions(plain, "web")


def test_a_permission_sync_before_any_run_signs_in_and_says_there_was_nothing_to_set(world, monkeypatch):
    """Issue 67, point 12: "Sync permissions" on a source that had never run reported COMPLETED (added 0, updated 0)
    without a request to the service: with a wrong secret it now fails as a run does; with the right one it signs in
    and says that no document has been brought yet."""
    runtime, kb, graph, _ = world
    monkeypatch.setenv("EDDI_VAULT_SP_SECRET", "wrong-secret-value")
    failed = runtime.sources.sync_permissions(kb, "intranet")
    assert failed.status == "FAILED" and "refused the client credentials: HTTP 401" in failed.error, failed.error
    # Health's fix names what to correct and the button to press (issue 67, point 13: it said "fix what it says")
    said = next(c for c in runtime.health.verdict(kb)["checks"] if c["check"] == "sources")
    assert "the secret stored in the vault" in said["fix"] and said["fix"].endswith("press Sync permissions on the source's card (Documents: Sources)"), said
    monkeypatch.setenv("EDDI_VAULT_SP_SECRET", CLIENT_SECRET)
    asked = len(graph.requests)
    done = runtime.sources.sync_permissions(kb, "intranet")
    assert done.status == "COMPLETED" and "no documents yet" in done.message and "run the source" in done.message
    assert len(graph.requests) > asked  # (it asked Graph: signed in, the site found)


def test_graph_permissions_map_to_principals():
    assert acl_of([
        {"roles": ["write"], "grantedToV2": {"user": {"id": "u1"}}},
        {"roles": ["read"], "grantedToV2": {"group": {"id": "g1"}}},
        {"roles": ["owner"], "grantedToV2": {"siteGroup": {"id": "3", "displayName": "Owners"}}},
        {"roles": ["read"], "link": {"scope": "organization"}},
        {"roles": ["read"], "link": {"scope": "anonymous"}},
        {"roles": ["read"], "link": {"scope": "users"}, "grantedToIdentitiesV2": [{"user": {"id": "u2"}}]},
    ], "contoso.sharepoint.com,s1,w1") == ["user:u1", "group:g1", "group:contoso.sharepoint.com,s1,w1/3", "link:organization",
                                         "public", "user:u2"]  # a site group is its site's: "Owners" of two sites are two


def test_the_source_status_and_a_test_of_its_connection(world, monkeypatch):
    runtime, kb, graph, drive = world
    before = runtime.sources.status(kb, "intranet")
    assert (before["lastRun"], before["cursor"], before["keepsPermissions"], before["documents"]) == (None, None, True, 0)
    assert "Sites.Selected" in before["needs"] and before["nextRun"] is None
    assert runtime.sources.test(kb, "intranet") == {"sourceId": "intranet", "ok": True}
    runtime.sources.run(kb, "intranet")
    runtime.sources.sync_permissions(kb, "intranet")
    after = runtime.sources.status(kb, "intranet")
    assert after["lastRun"]["added"] == 3 and after["lastPermissionSync"]["kind"] == "permissions" and after["cursor"]
    monkeypatch.setenv("EDDI_VAULT_SP_SECRET", "wrong-secret-value")
    refused = runtime.sources.test(kb, "intranet")
    assert not refused["ok"] and "refused the client credentials" in refused["error"] and "wrong-secret-value" not in refused["error"]


def test_a_failing_document_is_named_kept_until_fixed_and_counted_in_the_verdict(world):
    """Issue 58, finding 3: a run with failures says so (status COMPLETED as EDDI's, outcome COMPLETED_WITH_FAILURES),
    names the file, and the next delta run, which does not read it again, still says it fails; so does the verdict."""
    runtime, kb, graph, drive = world
    graph.put(drive, "broken.pdf", b"%PDF-1.7 this is not a PDF at all", mime="application/pdf", permissions=EVERYONE)
    first = runtime.sources.run(kb, "intranet")
    assert (first.status, first.outcome, first.added, first.failed) == ("COMPLETED", "COMPLETED_WITH_FAILURES", 3, 1)
    assert first.failures[0]["name"] == "HR/Documents/broken.pdf"
    delta = runtime.sources.run(kb, "intranet")
    assert (delta.failed, delta.outcome) == (0, "COMPLETED_WITH_FAILURES")
    assert [f["name"] for f in delta.failing] == ["HR/Documents/broken.pdf"]
    assert [f["name"] for f in runtime.sources.status(kb, "intranet")["failing"]] == ["HR/Documents/broken.pdf"]
    said = [c for c in runtime.health.verdict(kb)["checks"] if c["check"] == "sources"]
    assert said[0]["level"] == "warning" and "1 document(s) fail to ingest: HR/Documents/broken.pdf" in said[0]["detail"]
    assert "press Retry 1 failing on the source's card" in said[0]["fix"]  # the card's button, as it is named (point 13)
    assert runtime.health.verdict(kb)["status"] == "warning"
    assert runtime.sources.status(kb, "intranet")["documents"] == 3  # the failing file is not counted as a document

    graph.put(drive, "broken.pdf", pdf(["Now it reads."]), mime="application/pdf", permissions=EVERYONE)  # fixed in the source
    fixed = runtime.sources.run(kb, "intranet")
    assert (fixed.outcome, fixed.failing) == ("COMPLETED", [])
    assert [c["level"] for c in runtime.health.verdict(kb)["checks"] if c["check"] == "sources"] == ["ok"]


def test_health_sees_a_source_whose_secret_does_not_resolve_and_a_run_of_it_is_refused_naming_the_field(world, monkeypatch):
    """Issue 58, finding 4: a missing vault key is a failed check of the verdict and a 400 at run, not a 202 and a
    FAILED run later; a last run that failed is a warning."""
    runtime, kb, graph, drive = world
    monkeypatch.delenv("EDDI_VAULT_SP_SECRET")
    said = [c for c in runtime.health.verdict(kb)["checks"] if c["check"] == "sources"]
    assert said[0]["level"] == "failed" and "$.sources[0].sharepoint.clientSecret" in said[0]["detail"]
    assert "store the key" in said[0]["fix"]
    with pytest.raises(ConfigValidationError) as refused:
        runtime.sources.start(kb, "intranet")
    assert refused.value.status == 400 and refused.value.errors[0]["path"] == "$.sources[0].sharepoint.clientSecret"
    assert runtime.sources.runs(kb, "intranet") == []  # nothing started

    monkeypatch.setenv("EDDI_VAULT_SP_SECRET", "wrong-secret-value")
    assert runtime.sources.run(kb, "intranet").status == "FAILED"
    said = [c for c in runtime.health.verdict(kb)["checks"] if c["check"] == "sources"]
    assert said[0]["level"] == "warning" and "its last run failed" in said[0]["detail"] and "wrong-secret-value" not in said[0]["detail"]


def test_a_key_bound_to_a_user_reads_with_the_groups_a_permission_sync_found(world):
    """Issue 58, finding 7: the directory's synced groups reach a key bound to the user, beside the key's own groups."""
    from eddi_rag.common.principals import Reader

    runtime, kb, graph, drive = world
    runtime.sources.run(kb, "intranet")
    runtime.sources.sync_permissions(kb, "intranet")
    bound = Reader("u-alice", ("finance",))  # as an API key bound to alice with its own groups reads
    assert "HR/Documents/leave.md" in sources_read(runtime, kb, bound, "annual leave days")
    assert "HR/Documents/leave.md" not in sources_read(runtime, kb, Reader("u-bob", ("finance",)), "annual leave days")
