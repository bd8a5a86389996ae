"""An S3 bucket, or an S3-compatible store (MinIO, Ceph, R2... through ``endpointUrl``): the objects under
``prefix`` of a supported type, listed with boto3 (``ListObjectsV2``) and selected by include/exclude globs on their
key under the prefix. An object's ETag is its version: a run reads only the objects whose ETag changed, and one over
the size limit is refused from its listed size, never downloaded.

Credentials are the source's own ``accessKeyId`` / ``secretAccessKey`` (secret references, resolved in
the knowledge base's tenant); without them requests are unsigned (a public bucket). The server's own AWS
credentials are never used: a configuration must not read what the server's identity may. The endpoint
passes the outbound guard before each run."""

from __future__ import annotations

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
    object_taken,
    outbound,
    secret,
)


class S3Settings(Settings):
    """The objects under a prefix of an S3 bucket or an S3-compatible store (boto3): an object's ETag is its version."""

    bucket: str = Field(min_length=3, max_length=63)
    prefix: str = Field("", description="Only objects under it; their keys below it name the documents.")
    region: str = Field("us-east-1", min_length=1)
    endpointUrl: str | None = outbound(None, description=
        "An S3-compatible store (MinIO, Ceph, R2…); absent: AWS's endpoint of the region. The outbound guard "
        "checks it.")
    accessKeyId: str | None = secret(
        "A secret reference (${vault:KEY}; a key typed here is moved into the vault when saved); with neither key, "
        "requests are unsigned (a public bucket). The server's own AWS credentials are never used.")
    secretAccessKey: str | None = secret("A secret reference (${vault:KEY}).")
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the key under the prefix (* crosses folders).")
    exclude: Globs = Field(default_factory=list)



class S3SourceError(EddiRagError, ValueError):
    status = 400


def endpoint(spec: S3Settings) -> str:
    return spec.endpointUrl or f"https://s3.{spec.region}.amazonaws.com"


def client(spec: S3Settings, resolve: Callable[[Any], Any]) -> Any:
    """A boto3 S3 client of this source alone: its endpoint, region and keys (never the environment's: without keys its
    requests are unsigned)."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    key, secret = resolve(spec.accessKeyId), resolve(spec.secretAccessKey)
    if bool(key) != bool(secret):
        raise S3SourceError("s3: give both accessKeyId and secretAccessKey, or neither (a public bucket)")
    session = boto3.session.Session(aws_access_key_id=key or None, aws_secret_access_key=secret or None, region_name=spec.region)
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, **({} if key else {"signature_version": UNSIGNED}))
    return session.client("s3", endpoint_url=endpoint(spec), config=config)


def download(s3: Any, bucket: str, key: str, limit: int | None) -> tuple[bytes, str | None]:
    """An object's bytes (at most ``limit`` + 1 of them read: more is refused) and its Content-Type."""
    got = s3.get_object(Bucket=bucket, Key=key)
    body = got["Body"].read() if limit is None else got["Body"].read(limit + 1)
    got["Body"].close()
    if limit is not None and len(body) > limit:
        raise S3SourceError(f"{key}: over the limit of {limit:,} bytes (settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read")
    kind = got.get("ContentType")
    return body, None if kind in (None, "binary/octet-stream", "application/octet-stream") else kind


def _item(s3: Any, source_id: str, spec: S3Settings, key: str, rel: str, etag: str | None, limit: int | None) -> Item:
    return Item(f"{source_id}/{rel}", rel, lambda: download(s3, spec.bucket, key, limit), version=etag)


def listing(source_id: str, spec: S3Settings, resolve: Callable[[Any], Any], outbound: OutboundPolicy,
            max_bytes: int | None = None) -> Listing:
    """The objects under the prefix, each its own document ``<source id>/<key under the prefix>``, its ETag its version."""
    from botocore.exceptions import BotoCoreError, ClientError

    outbound.check(endpoint(spec))
    s3, prefix, out = client(spec, resolve), folder_prefix(spec.prefix), Listing()
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=spec.bucket, Prefix=prefix):
            for found in page.get("Contents", []):
                rel = object_taken(out, found["Key"], prefix, found.get("Size"), spec.include, spec.exclude, max_bytes)
                if rel is not None:
                    out.items.append(_item(s3, source_id, spec, found["Key"], rel, found.get("ETag"), max_bytes))
    except (BotoCoreError, ClientError) as e:
        raise S3SourceError(f"s3: cannot list s3://{spec.bucket}/{prefix} at {endpoint(spec)}: {e}") from e
    if not out.items and not out.failures:
        signed = bool(resolve(spec.accessKeyId))
        out.notes.append(f"s3://{spec.bucket}/{spec.prefix} listed no object of a supported type" + (
            "" if signed else ": the listing was unsigned (no accessKeyId / secretAccessKey), and a private bucket, or "
                              "one that refuses anonymous listing, shows nothing to it; give the source its keys"))
    return out


class S3Connector(Connector[S3Settings]):
    type = "s3"
    configuration = S3Settings
    needs = "a bucket; an access key id and secret in the vault (none: a public bucket)"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"s3://{spec.bucket}/{spec.prefix}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        ctx.outbound.check(endpoint(self.spec(source)))

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        self.validate(ctx, source)  # (the listing itself raises when the bucket cannot be listed)

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        return feed(listing(source.effective_id, self.spec(source), ctx.resolve, ctx.outbound, ctx.max_bytes), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        """The object alone (a retry): no listing."""
        spec = self.spec(source)
        ctx.outbound.check(endpoint(spec))
        rel = document_id.removeprefix(f"{source.effective_id}/")
        return _item(client(spec, ctx.resolve), source.effective_id, spec, folder_prefix(spec.prefix) + rel, rel, None,
                     ctx.max_bytes)


CONNECTOR = S3Connector()
