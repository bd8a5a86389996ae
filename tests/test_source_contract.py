"""Every source connector through the contract suite (eddi_rag.testing.SourceContract), against what it reads for real:
a folder, the upload store's database, a Git repository made with git, a website and a sitemap on 127.0.0.1, moto's
S3 server, gcp-storage-emulator's GCS JSON API, Azurite's Blob Storage and Dovecot's IMAP on loopback; SharePoint through a fake of
Microsoft Graph's JSON (tests/support/fake_graph.py), Google Drive and Confluence Cloud through fakes of their APIs
(tests/support/fake_drive.py, fake_confluence.py): the ones that cannot run here."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.config import IngestionSource, UploadSource
from eddi_rag.sources.base import SourceContext
from eddi_rag.sources.connectors import configuration_schema, connector, connectors
from eddi_rag.sources.files import Files, file_id
from eddi_rag.state.sqlite import Database
from eddi_rag.testing import SourceContract
from tests.support.dovecot import PASSWORD, USER, Mailbox, dovecot
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence
from tests.support.fake_drive import FakeDrive
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, FakeGraph
from tests.support.object_stores import ACCOUNT, KEY, azurite, gcs_emulator, moto_s3
from tests.support.site import Site


def context(tmp_path: Path, **kw) -> SourceContext:
    return SourceContext("kb", "default", tmp_path / "data", OutboundPolicy.from_env(), lambda value: value,
                         Files(Database(tmp_path / "state.db")), **kw)


def source(kind: str, **block) -> IngestionSource:
    return IngestionSource.model_validate({"name": "Docs", "type": kind, **({kind: block} if block else {})})


class FolderWorld:
    def __init__(self, tmp_path: Path):
        self.root = tmp_path / "docs"
        self.root.mkdir()
        self.connector, self.source, self.ctx = connector("folder"), source("folder", path=str(self.root)), context(tmp_path)

    def put(self, name: str, text: str) -> None:
        (self.root / name).write_text(text)

    def remove(self, name: str) -> None:
        (self.root / name).unlink()


class UploadWorld:
    def __init__(self, tmp_path: Path):
        self.connector, self.source, self.ctx = connector("upload"), source("upload"), context(tmp_path)

    def put(self, name: str, text: str) -> None:
        self.ctx.files.store("kb", "docs", UploadSource(), name, text.encode(), "text/markdown")

    def remove(self, name: str) -> None:
        self.ctx.files.delete("kb", "docs", file_id(name))


class GitWorld:
    def __init__(self, tmp_path: Path):
        self.repo = tmp_path / "repo"
        self.repo.mkdir()
        self.git("init", "-q", "-b", "main")
        self.git("commit", "-q", "--allow-empty", "-m", "start")
        self.connector, self.source = connector("git"), source("git", url=self.repo.as_uri())
        self.ctx = context(tmp_path)

    def git(self, *args: str) -> None:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.repo.parent)}
        subprocess.run(["git", *args], cwd=self.repo, env=env, check=True, capture_output=True)

    def put(self, name: str, text: str) -> None:
        (self.repo / name).write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", f"put {name}")

    def remove(self, name: str) -> None:
        self.git("rm", "-q", name)
        self.git("commit", "-q", "-m", f"remove {name}")


class WebWorld:
    """A site whose home page links each document."""

    def __init__(self, site: Site, tmp_path: Path):
        self.site, self.names = site, []
        self.connector = connector("web")
        self.source = source("web", startUrl=f"{site.url}/", maxDepth=1, requestDelayMs=0)
        self.ctx = context(tmp_path)
        self._home()

    def _home(self) -> None:
        self.site.html("/", "Home", "<p>Index</p>", [f"/{n}.html" for n in self.names])

    def put(self, name: str, text: str) -> None:
        self.site.html(f"/{name}.html", name, f"<p>{text}</p>")
        self.names = [*dict.fromkeys([*self.names, name])]
        self._home()

    def remove(self, name: str) -> None:
        del self.site.pages[f"/{name}.html"]
        self.names.remove(name)
        self._home()


class SitemapWorld:
    def __init__(self, site: Site, tmp_path: Path):
        self.site, self.names = site, []
        self.connector, self.source = connector("sitemap"), source("sitemap", url=f"{site.url}/sitemap.xml")
        self.ctx = context(tmp_path)
        self._map()

    def _map(self) -> None:
        urls = "".join(f"<url><loc>{self.site.url}/{n}</loc></url>" for n in self.names)
        body = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        self.site.pages["/sitemap.xml"] = ("application/xml", body.encode())

    def put(self, name: str, text: str) -> None:
        self.site.pages[f"/{name}"] = ("text/markdown", text.encode())
        self.names = [*dict.fromkeys([*self.names, name])]
        self._map()

    def remove(self, name: str) -> None:
        del self.site.pages[f"/{name}"]
        self.names.remove(name)
        self._map()


class S3World:
    def __init__(self, endpoint: str, tmp_path: Path):
        import boto3

        self.bucket = f"b-{tmp_path.name[-20:].lower().replace('_', '-')}".strip("-")
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                               aws_secret_access_key="test")
        self.s3.create_bucket(Bucket=self.bucket)
        self.connector = connector("s3")
        self.source = source("s3", bucket=self.bucket, prefix="docs/", endpointUrl=endpoint, accessKeyId="test",
                             secretAccessKey="test")
        self.ctx = context(tmp_path)

    def put(self, name: str, text: str) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=f"docs/{name}", Body=text.encode())

    def remove(self, name: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=f"docs/{name}")


class GcsWorld:
    def __init__(self, endpoint: str, tmp_path: Path):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        self.bucket = f"b-{tmp_path.name[-20:].lower().replace('_', '-')}".strip("-")
        self.gcs = storage.Client(project="t", credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint})
        self.gcs.create_bucket(self.bucket)
        self.connector = connector("gcs")
        self.source = source("gcs", bucket=self.bucket, prefix="docs/", endpointUrl=endpoint)
        self.ctx = context(tmp_path)

    def put(self, name: str, text: str) -> None:
        self.gcs.bucket(self.bucket).blob(f"docs/{name}").upload_from_string(text.encode(), content_type="text/markdown")

    def remove(self, name: str) -> None:
        self.gcs.bucket(self.bucket).blob(f"docs/{name}").delete()


class AzureBlobWorld:
    def __init__(self, account_url: str, tmp_path: Path):
        from azure.core.credentials import AzureNamedKeyCredential
        from azure.storage.blob import BlobServiceClient


        name = f"c{uuid.uuid4().hex[:20]}"  # (letters and digits: Azure's container names)
        service = BlobServiceClient(account_url, credential=AzureNamedKeyCredential(ACCOUNT, KEY))
        self.container = service.create_container(name)
        self.connector = connector("azureBlob")
        self.source = source("azureBlob", accountUrl=account_url, container=name, prefix="docs/", accountKey=KEY)
        self.ctx = context(tmp_path)

    def put(self, name: str, text: str) -> None:
        self.container.upload_blob(f"docs/{name}", text.encode(), overwrite=True)

    def remove(self, name: str) -> None:
        self.container.delete_blob(f"docs/{name}")


class SharePointWorld:
    def __init__(self, graph: FakeGraph, tmp_path: Path):
        self.graph = graph
        site = graph.site("/sites/hr", "HR")
        self.drive = graph.drive(site)
        self.connector = connector("sharepoint")
        self.source = source("sharepoint", tenantId=TENANT, clientId=CLIENT_ID, clientSecret=CLIENT_SECRET,
                             sites=["contoso.sharepoint.com:/sites/hr"], graphUrl=graph.url, loginUrl=graph.url)
        self.ctx = context(tmp_path)

    def put(self, name: str, text: str) -> None:
        self.graph.put(self.drive, name, text.encode(), permissions=[{"grantedToV2": {"group": {"id": "g-hr"}}}])

    def remove(self, name: str) -> None:
        self.graph.remove(self.drive, name)


class GdriveWorld:
    def __init__(self, drive: FakeDrive, tmp_path: Path):
        self.drive = drive
        self.connector = connector("gdrive")
        self.source = source("gdrive", credentials=drive.key, apiUrl=drive.url, adminUrl=drive.url)
        self.ctx = context(tmp_path)

    def put(self, name: str, text: str) -> None:
        self.drive.put(name, text.encode(), permissions=[{"type": "group", "emailAddress": "hr@acme.example"}])

    def remove(self, name: str) -> None:
        self.drive.trash(name)


class ConfluenceWorld:
    def __init__(self, wiki: FakeConfluence, tmp_path: Path):
        self.wiki, self.space = wiki, wiki.space("HR", "Human Resources", [("group", "g-staff")])
        self.connector = connector("confluence")
        self.source = source("confluence", baseUrl=wiki.url, email=EMAIL, apiToken=TOKEN, spaces=["HR"])
        self.ctx = context(tmp_path)

    def put(self, name: str, text: str) -> None:
        self.wiki.page(self.space, name, f"<p>{text}</p>")

    def remove(self, name: str) -> None:
        self.wiki.delete(name)


class ImapWorld:
    """A folder of a real Dovecot mailbox: a document is a mail whose subject is its name; changing it replaces the
    mail by one with the same Message-ID (an edited draft)."""

    def __init__(self, box: Mailbox, tmp_path: Path):
        self.imap, self.folder = box.client(), f"F{uuid.uuid4().hex[:10]}"
        self.imap.create_folder(self.folder)
        self.connector = connector("imap")
        self.source = source("imap", host=box.host, port=box.port, useTls=False, username=USER, password=PASSWORD,
                             folders=[self.folder])
        self.ctx = context(tmp_path)

    def put(self, name: str, text: str) -> None:
        from email.message import EmailMessage

        self.remove(name, missing_ok=True)
        mail = EmailMessage()
        mail["From"], mail["To"], mail["Subject"], mail["Message-ID"] = "bob@example.com", USER, name, f"<{name}@test>"
        mail.set_content(text)
        self.imap.append(self.folder, mail.as_bytes())

    def remove(self, name: str, missing_ok: bool = False) -> None:
        self.imap.select_folder(self.folder)
        found = self.imap.search(["HEADER", "Message-ID", f"<{name}@test>"])
        assert found or missing_ok
        if found:
            self.imap.delete_messages(found)
            self.imap.expunge()


def test_every_source_type_has_a_connector_in_the_contract():
    schema = configuration_schema()["properties"]["sources"]["items"]["properties"]["type"]
    assert list(connectors()) == schema["enum"]
    assert sorted(k.lower() for k in connectors()) == sorted(  # (azureBlob's class: TestAzureblobConnector)
        k.removeprefix("Test").removesuffix("Connector").lower() for k in globals() if k.endswith("Connector") and k.startswith("Test"))


class TestFolderConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path, monkeypatch):
        monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
        return FolderWorld(tmp_path)


class TestUploadConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path):
        return UploadWorld(tmp_path)


@pytest.mark.integration
class TestGitConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path, monkeypatch):
        monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
        return GitWorld(tmp_path)


@pytest.mark.integration
class TestWebConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path):
        with Site() as site:
            yield WebWorld(site, tmp_path)


@pytest.mark.integration
class TestSitemapConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path):
        with Site() as site:
            yield SitemapWorld(site, tmp_path)


@pytest.fixture(scope="module")
def s3_endpoint():
    with moto_s3() as endpoint:
        yield endpoint


@pytest.mark.integration
class TestS3Connector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path, s3_endpoint):
        return S3World(s3_endpoint, tmp_path)


@pytest.fixture(scope="module")
def gcs_endpoint():
    with gcs_emulator() as endpoint:
        yield endpoint


@pytest.mark.integration
class TestGcsConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path, gcs_endpoint):
        return GcsWorld(gcs_endpoint, tmp_path)


@pytest.fixture(scope="module")
def azure_account():
    with azurite() as account_url:
        yield account_url


@pytest.mark.integration
class TestAzureblobConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path, azure_account):
        return AzureBlobWorld(azure_account, tmp_path)


@pytest.mark.integration
class TestSharepointConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path):
        with FakeGraph(page_size=2) as graph:
            yield SharePointWorld(graph, tmp_path)


@pytest.mark.integration
class TestGdriveConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path):
        with FakeDrive(page_size=2) as drive:
            yield GdriveWorld(drive, tmp_path)


@pytest.mark.integration
class TestConfluenceConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path):
        with FakeConfluence(page_size=2) as wiki:
            yield ConfluenceWorld(wiki, tmp_path)


@pytest.fixture(scope="module")
def mailbox():
    with dovecot() as box:
        yield box


@pytest.mark.integration
class TestImapConnector(SourceContract):
    @pytest.fixture
    def world(self, tmp_path, mailbox):
        return ImapWorld(mailbox, tmp_path)
