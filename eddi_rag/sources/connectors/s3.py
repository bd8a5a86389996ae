"""An S3 bucket, or an S3-compatible store (MinIO, Ceph, R2... through ``endpointUrl``): the objects under
``prefix`` of a supported type, listed through LangChain's ``CloudBlobLoader`` (langchain-community,
cloudpathlib) and selected by include/exclude globs on their key under the prefix. Each object is read
when the sync engine asks for it, with this source's own client.

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
from eddi_rag.ingest.loaders import EXTENSIONS
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
    listed_again,
    outbound,
    secret,
    selected,
)


class S3Settings(Settings):
    """The objects under a prefix of an S3 bucket or an S3-compatible store, listed through LangChain's CloudBlobLoader."""

    bucket: str = Field(min_length=3, max_length=63)
    prefix: str = Field("", description="Only objects under it; their keys below it name the documents.")
    region: str = Field("us-east-1", min_length=1)
    endpointUrl: str | None = outbound(None, description=
        "An S3-compatible store (MinIO, Ceph, R2…); absent: AWS's endpoint of the region. The outbound guard "
        "checks it.")
    accessKeyId: str | None = Field(None, description=
        "A secret reference (${vault:KEY}); with neither key, requests are unsigned (a public bucket). "
        "The server's own AWS credentials are never used.")
    secretAccessKey: str | None = secret("A secret reference (${vault:KEY}).")
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the key under the prefix (* crosses folders).")
    exclude: Globs = Field(default_factory=list)



class S3SourceError(EddiRagError, ValueError):
    status = 400


def endpoint(spec: S3Settings) -> str:
    return spec.endpointUrl or f"https://s3.{spec.region}.amazonaws.com"


def client(spec: S3Settings, resolve: Callable[[Any], Any]) -> Any:
    """A cloudpathlib client of this source alone: its endpoint, region and keys (never the environment's)."""
    import boto3
    from cloudpathlib import S3Client

    key, secret = resolve(spec.accessKeyId), resolve(spec.secretAccessKey)
    if bool(key) != bool(secret):
        raise S3SourceError("s3: give both accessKeyId and secretAccessKey, or neither (a public bucket)")
    session = boto3.Session(aws_access_key_id=key or None, aws_secret_access_key=secret or None, region_name=spec.region,
                            botocore_session=None, profile_name=None)
    return S3Client(boto3_session=session, endpoint_url=endpoint(spec), no_sign_request=not key)


def _reader(path: Any) -> Callable[[], tuple[bytes, str | None]]:
    """The object's bytes, read when the sync engine asks (with the client ``path`` carries)."""
    return lambda: (path.read_bytes(), None)


def listing(source_id: str, spec: S3Settings, resolve: Callable[[Any], Any], outbound: OutboundPolicy) -> Listing:
    """The objects under the prefix, each its own document ``<source id>/<key under the prefix>``."""
    from botocore.exceptions import BotoCoreError, ClientError
    from langchain_community.document_loaders.blob_loaders import CloudBlobLoader

    outbound.check(endpoint(spec))
    s3 = client(spec, resolve)
    root = s3.CloudPath(f"s3://{spec.bucket}/{spec.prefix.strip('/')}".rstrip("/") + "/")
    out = Listing()
    try:
        for blob in CloudBlobLoader(root).yield_blobs():
            path = s3.CloudPath(str(blob.path))
            rel = str(path)[len(str(root)):]  # the key under the prefix (the glob lists only those)
            if path.suffix.lower() in EXTENSIONS and selected(rel, spec.include, spec.exclude):
                out.items.append(Item(f"{source_id}/{rel}", rel, _reader(path)))
    except (BotoCoreError, ClientError) as e:
        raise S3SourceError(f"s3: cannot list s3://{spec.bucket}/{spec.prefix} at {endpoint(spec)}: {e}") from e
    if not out.items:
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
        return feed(listing(source.effective_id, self.spec(source), ctx.resolve, ctx.outbound), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return listed_again(self, ctx, source, document_id, name)


CONNECTOR = S3Connector()
