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

from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.config import GcsSource, IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.sources import Item, Listing, folder_prefix, object_taken
from eddi_rag.sources.base import Sink, SourceContext, SyncEnd, feed, listed_again

GOOGLE = "https://storage.googleapis.com"


class GcsSourceError(EddiRagError, ValueError):
    status = 400


def endpoint(spec: GcsSource) -> str:
    return (spec.endpointUrl or GOOGLE).rstrip("/")


def client(spec: GcsSource, resolve: Callable[[Any], Any]) -> Any:
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


def listing(source_id: str, spec: GcsSource, resolve: Callable[[Any], Any], outbound: OutboundPolicy,
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


class GcsConnector:
    type = "gcs"
    needs = "a bucket; a service account's JSON key in the vault (none: a public bucket)"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        assert source.gcs is not None
        ctx.outbound.check(endpoint(source.gcs))

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        assert source.gcs is not None
        self.validate(ctx, source)
        client(source.gcs, ctx.resolve).get_bucket(source.gcs.bucket)  # (raises when it cannot be read)

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        assert source.gcs is not None
        return feed(listing(source.effective_id, source.gcs, ctx.resolve, ctx.outbound, ctx.max_bytes), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return listed_again(self, ctx, source, document_id, name)
