import pytest

from eddi_rag.resource_types import ResourceNotFoundError, VersionConflictError, parse_uri, resource_uri
from eddi_rag.resources import ResourceStore
from eddi_rag.state.sqlite import Database


@pytest.fixture
def store(tmp_path):
    return ResourceStore(Database(tmp_path / "r.db"))


def test_create_read_and_uri(store):
    ref = store.create("rags", {"name": "kb"})
    assert ref.version == 1
    assert ref.uri == f"eddi://ai.labs.rag/ragstore/rags/{ref.id}?version=1"
    assert store.read("rags", ref.id) == {"name": "kb"}
    assert store.read("rags", ref.id, 1) == {"name": "kb"}


def test_update_needs_the_current_version_and_keeps_history(store):
    ref = store.create("rags", {"name": "v1"})
    assert store.update("rags", ref.id, 1, {"name": "v2"}).version == 2
    with pytest.raises(VersionConflictError) as e:
        store.update("rags", ref.id, 1, {"name": "stale"})
    assert e.value.current == 2
    assert store.read("rags", ref.id, 1) == {"name": "v1"}
    assert store.read("rags", ref.id, 0) == {"name": "v2"}
    with pytest.raises(ResourceNotFoundError):
        store.read("rags", ref.id, 7)


def test_duplicate_gives_a_new_id_at_version_1(store):
    ref = store.create("rags", {"name": "a"})
    store.update("rags", ref.id, 1, {"name": "b"})
    dup = store.duplicate("rags", ref.id, 1)
    assert dup.id != ref.id and dup.version == 1
    assert store.read("rags", dup.id) == {"name": "a"}


def test_soft_delete_hides_and_permanent_delete_removes(store, tmp_path):
    ref = store.create("rags", {"name": "a"})
    store.update("rags", ref.id, 1, {"name": "b"})
    with pytest.raises(VersionConflictError):
        store.delete("rags", ref.id, version=1)
    store.delete("rags", ref.id, version=2)
    with pytest.raises(ResourceNotFoundError):
        store.read("rags", ref.id)
    assert store.db.query("SELECT COUNT(*) FROM resource_versions WHERE id=?", (ref.id,))[0][0] == 2  # history kept
    store.delete("rags", ref.id, permanent=True)
    assert store.db.query("SELECT COUNT(*) FROM resource_versions WHERE id=?", (ref.id,))[0][0] == 0
    with pytest.raises(ResourceNotFoundError):
        store.delete("rags", ref.id, permanent=True)


def test_descriptors_filter_and_page(store):
    for name in ["alpha", "beta", "alphabet"]:
        store.create("rags", {"name": name}, description=f"about {name}")
    names = {d.name for d in store.descriptors("rags", filter="alpha")}
    assert names == {"alpha", "alphabet"}
    first = store.descriptors("rags", limit=2, index=0)
    second = store.descriptors("rags", limit=2, index=1)
    assert len(first) == 2 and len(second) == 1
    d = first[0]
    assert d.resource.startswith("eddi://ai.labs.rag/ragstore/rags/") and d.createdOn and d.lastModifiedOn


def test_other_resource_kinds_and_explicit_ids(store):
    ref = store.create("agents", {"workflows": []}, id="my-agent")
    assert ref.uri == "eddi://ai.labs.agent/agentstore/agents/my-agent?version=1"
    with pytest.raises(ValueError, match="already exists"):
        store.create("agents", {}, id="my-agent")
    with pytest.raises(ValueError, match="invalid resource id"):
        store.create("agents", {}, id="../etc")


def test_parse_uri():
    ref = parse_uri("eddi://ai.labs.workflow/workflowstore/workflows/abc?foo=1&version=3")
    assert (ref.kind, ref.id, ref.version) == ("workflows", "abc", 3)
    assert parse_uri(resource_uri("llm", "x", 2)).kind == "llm"
    for bad in ["", "http://x/y", "eddi://ai.labs.rag/ragstore/rags/abc", "eddi://ai.labs.rag/ragstore/rags/abc?version=x",
                "eddi://unknown/store/things/abc?version=1", "eddi://ai.labs.rag/ragstore/rags/abc?subversion=1"]:
        with pytest.raises(ValueError):
            parse_uri(bad)


def test_resources_survive_reopening(tmp_path):
    ref = ResourceStore(Database(tmp_path / "r.db")).create("rags", {"name": "kept"})
    assert ResourceStore(Database(tmp_path / "r.db")).read("rags", ref.id) == {"name": "kept"}
