"""Git and S3 sources (through LangChain's loaders), GCS and Azure Blob, reconciled like the folder source: added, changed,
unchanged, deleted. Against real servers: a Git repository made with the git command, moto's S3 server
on loopback, gcp-storage-emulator's GCS JSON API and Azurite's Blob Storage on loopback."""

from __future__ import annotations

import os
import subprocess

import pytest

from eddi_rag import SearchRequest
from eddi_rag.config import validate_rag_configuration
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.knowledge_bases import ConfigValidationError
from tests.support import files
from tests.support.kbs import make_kb
from tests.support.object_stores import gcs_emulator, moto_s3

pytestmark = pytest.mark.integration

GUIDE = "# Guide\n\n## Tea\n\nGreen tea is brewed at 80 degrees.\n\n## Coffee\n\nEspresso takes 25 seconds.\n"


def kb_with(runtime: Runtime, source: dict, **settings) -> str:
    return make_kb(runtime, chunkStrategy="markdown", minScore=0,
                   sources=[{"name": "Docs", **source, "settings": {"tombstoneAfterMissedRuns": 1, **settings}}])


def documents(runtime: Runtime, kb: str) -> set[str]:
    return {c.metadata["document_id"] for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None)}


def git(repo, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    path = tmp_path / "handbook"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "guide.md").write_text(GUIDE)
    (path / "notes").mkdir()
    (path / "notes" / "trains.txt").write_text("Night trains leave Vienna at 22:00.")
    (path / "logo.png").write_bytes(files.PNG)
    (path / "build.md").write_text("# generated")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    return path


def test_a_git_repository_is_kept_in_sync_commit_by_commit(tmp_path, repo):
    runtime = Runtime(tmp_path / "data")
    kb = kb_with(runtime, {"type": "git", "git": {"url": repo.as_uri(), "exclude": ["build.md"]}})
    run = runtime.sources.run(kb, "docs")
    assert (run.status, run.added, run.failed) == ("COMPLETED", 2, 1)  # the logo is read as a folder's image is (a stub)
    assert [f["name"] for f in run.failures] == ["logo.png"] and "image" in run.failures[0]["reason"], run.failures
    assert documents(runtime, kb) == {"docs/guide.md", "docs/notes/trains.txt"}
    assert runtime.sources.run(kb, "docs").unchanged == 2

    (repo / "guide.md").write_text(GUIDE.replace("25 seconds", "30 seconds"))
    (repo / "notes" / "trains.txt").unlink()
    (repo / "faq.md").write_text("# FAQ\n\nTickets are refundable until departure.")
    (repo / "escape.md").symlink_to("/etc/hostname")  # a link in a repository is never followed
    (repo / "report.pdf").write_bytes(files.pdf(["Revenue grew by 12 percent in the second quarter."]))  # not text:
    (repo / "plan.docx").write_bytes(files.docx([("h1", "Plan"), ("p", "Platforms move to track 9.")]))  # read
    git(repo, "add", "-A")  # as a folder's (issue 58: GitLoader skipped them)
    git(repo, "commit", "-q", "-m", "second")
    changed = runtime.sources.run(kb, "docs")
    assert (changed.added, changed.updated, changed.deleted) == (3, 1, 1), changed.failures
    assert documents(runtime, kb) == {"docs/guide.md", "docs/faq.md", "docs/report.pdf", "docs/plan.docx"}
    assert "track 9" in runtime.search.hits(SearchRequest(kb, "Which track do platforms move to?", k=1))[0].text
    assert [f["document"] for f in changed.failures] == ["escape.md"]
    hits = runtime.search.hits(SearchRequest(kb, "How long does an espresso take?", k=1))
    assert "30 seconds" in hits[0].text
    runtime.close()


def test_a_git_source_is_refused_where_a_folder_source_would_be(tmp_path, repo, monkeypatch):
    runtime = Runtime(tmp_path / "data")
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path / "elsewhere"))
    with pytest.raises(ConfigValidationError) as refused:
        kb_with(runtime, {"type": "git", "git": {"url": repo.as_uri()}})
    assert refused.value.errors[0]["path"] == "$.sources[0].git.url"
    with pytest.raises(ConfigValidationError) as bad:
        kb_with(runtime, {"type": "git", "git": {"url": "ssh://git@example.com/x.git"}})
    assert bad.value.errors[0]["path"].startswith("$.sources[0]")
    with pytest.raises(ConfigValidationError) as metadata:
        kb_with(runtime, {"type": "s3", "s3": {"bucket": "docs", "endpointUrl": "http://169.254.169.254/"}})
    assert metadata.value.errors[0]["path"] == "$.sources[0].s3.endpointUrl"
    runtime.close()


@pytest.fixture
def s3_server():
    with moto_s3() as endpoint:
        yield endpoint


def test_an_s3_bucket_is_kept_in_sync_object_by_object(tmp_path, s3_server, monkeypatch):
    import boto3

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EDDI_VAULT_S3_KEY", "test-key")  # the default tenant's vault
    monkeypatch.setenv("EDDI_VAULT_S3_SECRET", "test-secret")
    s3 = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1", aws_access_key_id="test-key",
                      aws_secret_access_key="test-secret")
    s3.create_bucket(Bucket="handbook")
    s3.put_object(Bucket="handbook", Key="docs/guide.md", Body=GUIDE.encode())
    s3.put_object(Bucket="handbook", Key="docs/report.pdf", Body=files.pdf(["Revenue grew by 12 percent."]))
    s3.put_object(Bucket="handbook", Key="docs/old/trains.txt", Body=b"Night trains leave Vienna at 22:00.")
    s3.put_object(Bucket="handbook", Key="other/elsewhere.md", Body=b"# Not under the prefix")

    runtime = Runtime(tmp_path / "data")
    kb = kb_with(runtime, {"type": "s3", "s3": {"bucket": "handbook", "prefix": "docs/", "endpointUrl": s3_server,
                                                "accessKeyId": "${eddivault:S3_KEY}", "secretAccessKey": "${eddivault:S3_SECRET}"}})
    run = runtime.sources.run(kb, "docs")
    assert (run.status, run.added, run.failed) == ("COMPLETED", 3, 0)
    assert documents(runtime, kb) == {"docs/guide.md", "docs/report.pdf", "docs/old/trains.txt"}

    from eddi_rag.sources.connectors import s3 as connector

    downloads: list[str] = []
    original = connector.download
    monkeypatch.setattr(connector, "download", lambda c, bucket, key, limit: downloads.append(key) or original(c, bucket, key, limit))
    quiet = runtime.sources.run(kb, "docs")
    assert (quiet.unchanged, downloads) == (3, [])  # the ETags said nothing changed: nothing downloaded (issue 58)
    s3.put_object(Bucket="handbook", Key="docs/guide.md", Body=GUIDE.replace("25 seconds", "30 seconds").encode())
    s3.delete_object(Bucket="handbook", Key="docs/old/trains.txt")
    changed = runtime.sources.run(kb, "docs")
    assert (changed.updated, changed.unchanged, changed.deleted) == (1, 1, 1) and downloads == ["docs/guide.md"]
    assert documents(runtime, kb) == {"docs/guide.md", "docs/report.pdf"}
    # the source's maxBytesPerPage holds for every connector (issue 58, finding 6: web and sitemap alone kept it), and a
    # text cut to maxContentLength says so
    s3.put_object(Bucket="handbook", Key="long/huge.md", Body=b"# Huge\n\n" + b"word " * 300_000)  # 1.5 MB
    s3.put_object(Bucket="handbook", Key="long/long.md", Body=b"# Long\n\n" + b"words and more " * 10_000)  # 150 k chars
    limited = kb_with(runtime, {"type": "s3", "s3": {"bucket": "handbook", "prefix": "long/", "endpointUrl": s3_server,
                                                     "accessKeyId": "${vault:S3_KEY}", "secretAccessKey": "${vault:S3_SECRET}"}},
                      maxBytesPerPage=1_000_000)
    run = runtime.sources.run(limited, "docs")
    assert [f["document"] for f in run.failures] == ["huge.md"] and "over the limit of 1,000,000" in run.failures[0]["reason"]
    assert "long/huge.md" not in downloads  # refused from its listed size, never read
    assert run.added == 1 and "long.md: its text (" in run.message and "cut to the first 100,000" in run.message
    # an unsigned run that lists nothing says why it may have (issue 42, finding 10: it said nothing)
    empty = kb_with(runtime, {"type": "s3", "s3": {"bucket": "handbook", "prefix": "nothing-here/", "endpointUrl": s3_server}})
    run = runtime.sources.run(empty, "docs")
    assert run.status == "COMPLETED" and "unsigned" in run.message and "accessKeyId" in run.message
    assert "unsigned" in runtime.sources.runs(empty, "docs")[0]["message"]
    runtime.close()


def test_s3_keys_are_the_sources_own_never_the_servers(monkeypatch):
    """A source naming no keys sends unsigned requests: the server's own AWS credentials never sign for a tenant."""
    from botocore import UNSIGNED

    from eddi_rag.sources.connectors import s3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "the-servers-own")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "never-used")
    config = validate_rag_configuration({"name": "kb", "sources": [{"name": "b", "type": "s3", "s3": {"bucket": "private"}}]})
    assert s3.client(s3.CONNECTOR.spec(config.sources[0]), lambda v: v).meta.config.signature_version is UNSIGNED
    with pytest.raises(s3.S3SourceError, match="both accessKeyId and secretAccessKey"):
        s3.client(s3.CONNECTOR.spec(config.sources[0]).model_copy(update={"accessKeyId": "only-one"}), lambda v: v)


def test_a_git_source_reads_nothing_outside_the_roots_and_no_file_over_the_limit(tmp_path, monkeypatch):
    """Issue 42, point 3: a folder under the roots whose ``.git`` is a file saying ``gitdir: <outside>`` made the source
    clone the outside repository; ``objects/info/alternates`` pointing out lent it outside objects; and a 300 MB file
    was read into the server before any limit refused it."""
    roots, outside = tmp_path / "roots", tmp_path / "outside"
    roots.mkdir()
    outside.mkdir()
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(roots))
    secret = outside / "secret"
    secret.mkdir()
    git(secret, "init", "-q", "-b", "main")
    (secret / "plans.md").write_text("The outside plans: launch at dawn.")
    git(secret, "add", "-A")
    git(secret, "commit", "-q", "-m", "outside")

    linked = roots / "linked"
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {secret / '.git'}\n")
    borrowing = roots / "borrowing"
    git(roots, "clone", "-q", "--shared", str(secret), str(borrowing))  # its objects/info/alternates points out
    assert (borrowing / ".git" / "objects" / "info" / "alternates").is_file()
    runtime = Runtime(tmp_path / "data")
    for folder, why in ((linked, "a gitdir link"), (borrowing, "objects/info/alternates")):
        kb = kb_with(runtime, {"type": "git", "git": {"url": folder.as_uri()}})
        run = runtime.sources.run(kb, "docs")
        assert run.status == "FAILED" and why in run.error and "outside the folders" in run.error, run.error
        assert documents(runtime, kb) == set()

    # inside the roots, a gitdir link is followed as git follows it
    inner = roots / "inner"
    git(roots, "clone", "-q", str(secret), str(inner / "store"))
    work = roots / "work"
    work.mkdir()
    (work / ".git").write_text("gitdir: ../inner/store/.git\n")
    kb = kb_with(runtime, {"type": "git", "git": {"url": work.as_uri()}})
    assert runtime.sources.run(kb, "docs").added == 1

    # a file over the upload limit is listed as a failure and never read
    monkeypatch.setenv("EDDI_RAG_MAX_UPLOAD_MB", "1")
    big = roots / "big"
    big.mkdir()
    git(big, "init", "-q", "-b", "main")
    (big / "huge.md").write_text("word " * 300_000)  # 1.5 MB
    (big / "small.md").write_text("A small page.")
    git(big, "add", "-A")
    git(big, "commit", "-q", "-m", "big")
    kb = kb_with(runtime, {"type": "git", "git": {"url": big.as_uri()}})
    run = runtime.sources.run(kb, "docs")
    assert run.added == 1 and [f["document"] for f in run.failures] == ["huge.md"]
    assert "over the limit of 1,048,576" in run.failures[0]["reason"] and "EDDI_RAG_MAX_UPLOAD_MB" in run.failures[0]["reason"]
    runtime.close()


def test_a_git_source_resumes_from_its_cursor_relists_after_a_force_push_and_can_be_reset(tmp_path, repo):
    """The cursor is the commit a run listed: the next run reads only what changed since and deletes what was removed
    (the rest named unchanged, unread);
    a history rewritten under it (a force-push) lists the branch in full; reset-cursor asks for a full listing."""
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app

    runtime = Runtime(tmp_path / "data")
    kb = kb_with(runtime, {"type": "git", "git": {"url": repo.as_uri(), "exclude": ["build.md", "*.png"]}})
    first = runtime.sources.run(kb, "docs")
    assert (first.seen, first.added) == (2, 2) and runtime.sources.cursor(kb, "docs")
    (repo / "guide.md").write_text(GUIDE.replace("80 degrees", "75 degrees"))
    git(repo, "rm", "-q", "notes/trains.txt")
    (repo / "new.md").write_text("# New\n\nA new page.")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    delta = runtime.sources.run(kb, "docs")
    assert (delta.added, delta.updated, delta.deleted, delta.unchanged) == (1, 1, 1, 0)  # only what the commit touched
    assert documents(runtime, kb) == {"docs/guide.md", "docs/new.md"}
    quiet = runtime.sources.run(kb, "docs")  # nothing committed since: named unchanged, nothing read
    assert (quiet.unchanged, quiet.added, quiet.updated, quiet.embedded) == (2, 0, 0, 0)
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # the history rewritten: the cursor's commit is gone from it
    (repo / "other.md").write_text("# Other\n\nAnother page.")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "rewritten")
    relisted = runtime.sources.run(kb, "docs")
    assert relisted.status == "COMPLETED" and "the cursor was no longer valid" in relisted.message
    assert documents(runtime, kb) == {"docs/guide.md", "docs/notes/trains.txt", "docs/other.md"}  # new.md: gone with it
    with TestClient(create_app(runtime)) as client:
        base = f"/ragstore/rags/{kb}/sources/docs"
        assert client.get(f"{base}/cursor").json()["cursor"] == runtime.sources.cursor(kb, "docs") is not None
        assert client.post(f"{base}/reset-cursor").json() == {"status": "reset", "sourceId": "docs"}
        assert client.get(f"{base}/cursor").json() == {"sourceId": "docs", "cursor": None}
    assert runtime.sources.run(kb, "docs").unchanged == 3  # listed in full, each read and found as it was
    runtime.close()


@pytest.fixture
def gcs_server():
    with gcs_emulator() as endpoint:
        yield endpoint


def test_a_gcs_bucket_is_kept_in_sync_and_an_unchanged_object_is_not_downloaded(tmp_path, gcs_server, monkeypatch):
    """Against gcp-storage-emulator (GCS's JSON API on loopback): added, changed, unchanged, deleted; an object whose
    ETag did not change is not downloaded again; a key that is no service account's names the field."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    gcs = storage.Client(project="t", credentials=AnonymousCredentials(), client_options={"api_endpoint": gcs_server})
    bucket = gcs.create_bucket("handbook")
    bucket.blob("docs/guide.md").upload_from_string(GUIDE.encode(), content_type="text/markdown")
    bucket.blob("docs/report.pdf").upload_from_string(files.pdf(["Revenue grew by 12 percent."]), content_type="application/pdf")
    bucket.blob("docs/old/trains.txt").upload_from_string(b"Night trains leave Vienna at 22:00.")
    bucket.blob("other/elsewhere.md").upload_from_string(b"# Not under the prefix")
    runtime = Runtime(tmp_path / "data")
    kb = kb_with(runtime, {"type": "gcs", "gcs": {"bucket": "handbook", "prefix": "docs", "endpointUrl": gcs_server}})
    run = runtime.sources.run(kb, "docs")
    assert (run.status, run.added, run.failed) == ("COMPLETED", 3, 0)
    assert documents(runtime, kb) == {"docs/guide.md", "docs/report.pdf", "docs/old/trains.txt"}

    downloads: list[str] = []
    original = storage.Blob.download_as_bytes
    monkeypatch.setattr(storage.Blob, "download_as_bytes", lambda self, *a, **kw: downloads.append(self.name) or original(self, *a, **kw))
    bucket.blob("docs/guide.md").upload_from_string(GUIDE.replace("25 seconds", "30 seconds").encode())
    bucket.blob("docs/old/trains.txt").delete()
    changed = runtime.sources.run(kb, "docs")
    assert (changed.updated, changed.unchanged, changed.deleted) == (1, 1, 1) and downloads == ["docs/guide.md"]
    assert documents(runtime, kb) == {"docs/guide.md", "docs/report.pdf"}

    monkeypatch.setenv("EDDI_VAULT_GCS_KEY", '{"type": "not a service account"}')
    keyed = kb_with(runtime, {"type": "gcs", "gcs": {"bucket": "handbook", "endpointUrl": gcs_server,
                                                     "credentials": "${eddivault:GCS_KEY}"}})
    failed = runtime.sources.run(keyed, "docs")
    assert failed.status == "FAILED" and "gcs.credentials: not a service account's JSON key" in failed.error
    with pytest.raises(ConfigValidationError) as metadata:
        kb_with(runtime, {"type": "gcs", "gcs": {"bucket": "docs", "endpointUrl": "http://169.254.169.254/"}})
    assert metadata.value.errors[0]["path"] == "$.sources[0].gcs.endpointUrl"
    runtime.close()


def test_an_azure_container_is_kept_in_sync_with_its_key_from_the_vault(tmp_path, monkeypatch):
    """Against Azurite (npm, on loopback): added, changed, unchanged (its ETag: not downloaded), deleted; the account key
    from the vault; a container that cannot be listed fails the run naming it; a metadata address is refused at save."""
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.storage.blob import BlobClient, BlobServiceClient

    from tests.support.object_stores import ACCOUNT, KEY, azurite

    with azurite() as account_url:
        box = BlobServiceClient(account_url, credential=AzureNamedKeyCredential(ACCOUNT, KEY)).create_container("handbook")
        box.upload_blob("docs/guide.md", GUIDE.encode())
        box.upload_blob("docs/report.pdf", files.pdf(["Revenue grew by 12 percent."]))
        box.upload_blob("docs/old/trains.txt", b"Night trains leave Vienna at 22:00.")
        box.upload_blob("other/elsewhere.md", b"# Not under the prefix")
        monkeypatch.setenv("EDDI_VAULT_AZURE_KEY", KEY)  # the default tenant's vault
        runtime = Runtime(tmp_path / "data")
        kb = kb_with(runtime, {"type": "azureBlob", "azureBlob": {"accountUrl": account_url, "container": "handbook",
                                                                  "prefix": "docs/", "accountKey": "${eddivault:AZURE_KEY}"}})
        run = runtime.sources.run(kb, "docs")
        assert (run.status, run.added, run.failed) == ("COMPLETED", 3, 0), run.error
        assert documents(runtime, kb) == {"docs/guide.md", "docs/report.pdf", "docs/old/trains.txt"}
        downloads: list[str] = []
        original = BlobClient.download_blob
        monkeypatch.setattr(BlobClient, "download_blob", lambda self, *a, **kw: downloads.append(self.blob_name) or original(self, *a, **kw))
        box.upload_blob("docs/guide.md", GUIDE.replace("25 seconds", "30 seconds").encode(), overwrite=True)
        box.delete_blob("docs/old/trains.txt")
        changed = runtime.sources.run(kb, "docs")
        assert (changed.updated, changed.unchanged, changed.deleted) == (1, 1, 1) and downloads == ["docs/guide.md"]
        anonymous = kb_with(runtime, {"type": "azureBlob", "azureBlob": {"accountUrl": account_url, "container": "handbook"}})
        refused = runtime.sources.run(anonymous, "docs")  # a private container: no anonymous listing
        assert refused.status == "FAILED" and "azureBlob: cannot list handbook/" in refused.error
    with pytest.raises(ConfigValidationError) as metadata:
        kb_with(runtime, {"type": "azureBlob", "azureBlob": {"accountUrl": "http://169.254.169.254/x", "container": "docs"}})
    assert metadata.value.errors[0]["path"] == "$.sources[0].azureBlob.accountUrl"
    runtime.close()
