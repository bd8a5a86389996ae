"""An Azure Blob Storage container: the blobs under a prefix (azure-storage-blob), each its own document
``<source id>/<name under the prefix>``, selected by include/exclude globs on that name. A blob's ETag is its version:
a blob whose ETag did not change since the last run is not downloaded again.

``accountKey`` or ``sasToken`` is a secret reference resolved in the knowledge base's tenant; with neither, requests
are anonymous (a public container): the server's own Azure credentials are never used. ``accountUrl`` is checked by
the outbound guard. A blob over the upload limit (``EDDI_RAG_MAX_UPLOAD_MB``) is listed as a failure, never read."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.sources.base import (
    Connector,
    Globs,
    Item,
    Listing,
    Settings,
    Sink,
    SourceContext,
    SyncEnd,
    feed,
    folder_prefix,
    listed_again,
    object_taken,
    outbound,
    secret,
)


class AzureBlobSettings(Settings):
    """The blobs under a prefix of an Azure Blob Storage container (azure-storage-blob)."""

    accountUrl: str = outbound(description=
        "https://<account>.blob.core.windows.net, or an emulator's http://host:port/<account>. The outbound "
        "guard checks it.")
    container: str = Field(min_length=3, max_length=63)
    prefix: str = Field("", description="Only blobs under it; their names below it name the documents.")
    accountKey: str | None = secret("A secret reference (${vault:KEY}) to the storage account's key.")
    sasToken: str | None = secret(
        "A secret reference (${vault:KEY}) to a SAS token, instead of the account key; with neither, "
        "requests are anonymous (a public container).")
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the name under the prefix (* crosses folders).")
    exclude: Globs = Field(default_factory=list)



class AzureBlobSourceError(EddiRagError, ValueError):
    status = 400


def account_name(url: str) -> str:
    """The storage account an account URL names: its host's first label, or (an emulator's path-style URL on an
    address or localhost) its first path segment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        path_style = True
    except ValueError:
        path_style = host == "localhost"
    return parts.path.strip("/").split("/")[0] if path_style else host.split(".")[0]


def container(spec: AzureBlobSettings, resolve: Callable[[Any], Any]) -> Any:
    """A client of the container, signed with the account key or the SAS token when the source names one."""
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
    from azure.storage.blob import ContainerClient

    key = resolve(spec.accountKey) if spec.accountKey else None
    sas = resolve(spec.sasToken) if spec.sasToken else None
    credential: Any = AzureNamedKeyCredential(account_name(spec.accountUrl), key) if key else AzureSasCredential(sas) if sas else None
    return ContainerClient(spec.accountUrl.rstrip("/"), spec.container, credential=credential)


def _reader(client: Any, name: str, content_type: str | None) -> Callable[[], tuple[bytes, str | None]]:
    return lambda: (client.download_blob(name).readall(), content_type)


def listing(source_id: str, spec: AzureBlobSettings, resolve: Callable[[Any], Any], max_bytes: int | None = None) -> Listing:
    from azure.core.exceptions import AzureError

    prefix = folder_prefix(spec.prefix)
    client = container(spec, resolve)
    out = Listing()
    try:
        for blob in client.list_blobs(name_starts_with=prefix or None):
            rel = object_taken(out, blob.name, prefix, blob.size, spec.include, spec.exclude, max_bytes)
            if rel is None:
                continue
            content_type = blob.content_settings.content_type if blob.content_settings else None
            content_type = None if content_type == "application/octet-stream" else content_type  # (no type said)
            out.items.append(Item(f"{source_id}/{rel}", rel, _reader(client, blob.name, content_type), version=blob.etag,
                                  media_type=content_type))
    except AzureError as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise AzureBlobSourceError(f"azureBlob: cannot list {spec.container}/{prefix} at {spec.accountUrl}: {reason}") from e
    return out


class AzureBlobConnector(Connector[AzureBlobSettings]):
    type = "azureBlob"
    configuration = AzureBlobSettings
    needs = "an Azure Storage account URL and container; its account key or a SAS token in the vault (none: a public container)"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"{spec.accountUrl} {spec.container}/{spec.prefix}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        ctx.outbound.check(self.spec(source).accountUrl)

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        self.validate(ctx, source)
        container(self.spec(source), ctx.resolve).get_container_properties()  # (raises when it cannot be read)

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        ctx.outbound.check(self.spec(source).accountUrl)
        return feed(listing(source.effective_id, self.spec(source), ctx.resolve, ctx.max_bytes), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return listed_again(self, ctx, source, document_id, name)


CONNECTOR = AzureBlobConnector()
