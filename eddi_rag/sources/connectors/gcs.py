"""A Google Cloud Storage bucket: the objects under a prefix (google-cloud-storage, over GCS's JSON API), each its own
document ``<source id>/<name under the prefix>``, selected by include/exclude globs on that name. An object's ETag is
its version: an object whose ETag did not change since the last run is not downloaded again.

``credentials`` is a secret reference to a service account's JSON key, resolved in the knowledge base's tenant;
without it requests are anonymous (a public bucket): the server's own Google credentials are never used.
``endpointUrl`` (another endpoint of the JSON API, such as an emulator) is checked by the outbound guard, as Google's
own endpoint is. An object over the upload limit (``EDDI_RAG_MAX_UPLOAD_MB``) is listed as a failure, never read."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import Field

from eddi_rag.common.outbound import OutboundPolicy
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

GOOGLE = "https://storage.googleapis.com"


class GcsSettings(Settings):
    """The objects under a prefix of a Google Cloud Storage bucket (its JSON API, google-cloud-storage)."""

    bucket: str = Field(min_length=3, max_length=222)
    prefix: str = Field("", description="Only objects under it; their names below it name the documents.")
    endpointUrl: str | None = outbound(None, description=
        "Another endpoint of the JSON API (an emulator); absent: https://storage.googleapis.com. The outbound "
        "guard checks it.")
    credentials: str | None = secret(
        "A secret reference (${vault:KEY}) to a service account's JSON key; absent: requests are "
        "anonymous (a public bucket). The server's own Google credentials are never used.")
    projectId: str | None = Field(None, min_length=1)
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the name under the prefix (* crosses folders).")
    exclude: Globs = Field(default_factory=list)



class GcsSourceError(EddiRagError, ValueError):
    status = 400


def endpoint(spec: GcsSettings) -> str:
    return (spec.endpointUrl or GOOGLE).rstrip("/")


def client(spec: GcsSettings, resolve: Callable[[Any], Any]) -> Any:
    """A storage client for ``spec``: its service account's key when it names one, else anonymous."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    key = resolve(spec.credentials) if spec.credentials else None
    if key:
        from google.oauth2 import service_account

        try:
            credentials: Any = service_account.Credentials.from_service_account_info(json.loads(key))
        except (ValueError, KeyError) as e:
            raise GcsSourceError(f"gcs.credentials: not a service account's JSON key ({type(e).__name__})") from None
    else:
        credentials = AnonymousCredentials()
    return storage.Client(project=spec.projectId or "eddi-rag", credentials=credentials,
                          client_options={"api_endpoint": endpoint(spec)})


def _reader(blob: Any) -> Callable[[], tuple[bytes, str | None]]:
    return lambda: (blob.download_as_bytes(), blob.content_type)


def listing(source_id: str, spec: GcsSettings, resolve: Callable[[Any], Any], outbound: OutboundPolicy,
            max_bytes: int | None = None) -> Listing:
    from google.api_core.exceptions import GoogleAPIError

    outbound.check(endpoint(spec))
    prefix = folder_prefix(spec.prefix)
    out = Listing()
    try:
        for blob in client(spec, resolve).list_blobs(spec.bucket, prefix=prefix or None):
            rel = object_taken(out, blob.name, prefix, blob.size, spec.include, spec.exclude, max_bytes)
            if rel is None:
                continue
            out.items.append(Item(f"{source_id}/{rel}", rel, _reader(blob), version=blob.etag, media_type=blob.content_type))
    except GoogleAPIError as e:
        raise GcsSourceError(f"gcs: cannot list gs://{spec.bucket}/{prefix} at {endpoint(spec)}: {e}") from e
    return out


class GcsConnector(Connector[GcsSettings]):
    type = "gcs"
    configuration = GcsSettings
    needs = "a bucket; a service account's JSON key in the vault (none: a public bucket)"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"gs://{spec.bucket}/{spec.prefix}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        ctx.outbound.check(endpoint(self.spec(source)))

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        self.validate(ctx, source)
        client(self.spec(source), ctx.resolve).get_bucket(self.spec(source).bucket)  # (raises when it cannot be read)

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        return feed(listing(source.effective_id, self.spec(source), ctx.resolve, ctx.outbound, ctx.max_bytes), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return listed_again(self, ctx, source, document_id, name)


CONNECTOR = GcsConnector()
