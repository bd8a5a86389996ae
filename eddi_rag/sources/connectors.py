"""Every kind of source, by its ``type`` (one module each, one protocol: ``sources.base.SourceConnector``)."""

from __future__ import annotations

from eddi_rag.errors import EddiRagError
from eddi_rag.sources.azure_blob import AzureBlobConnector
from eddi_rag.sources.base import SourceConnector
from eddi_rag.sources.confluence import ConfluenceConnector
from eddi_rag.sources.folder import FolderConnector
from eddi_rag.sources.gcs import GcsConnector
from eddi_rag.sources.gdrive import GoogleDriveConnector
from eddi_rag.sources.git import GitConnector
from eddi_rag.sources.imap import ImapConnector
from eddi_rag.sources.s3 import S3Connector
from eddi_rag.sources.sharepoint import SharePointConnector
from eddi_rag.sources.sitemap import SitemapConnector
from eddi_rag.sources.upload import UploadConnector
from eddi_rag.sources.web import WebConnector

CONNECTORS: dict[str, SourceConnector] = {c.type: c for c in (
    WebConnector(), UploadConnector(), FolderConnector(), SitemapConnector(), GitConnector(), S3Connector(), GcsConnector(),
    AzureBlobConnector(), SharePointConnector(), GoogleDriveConnector(), ConfluenceConnector(),
    ImapConnector())}


class UnknownSourceTypeError(EddiRagError, ValueError):
    status = 400


def connector(kind: str) -> SourceConnector:
    found = CONNECTORS.get(kind)
    if found is None:
        raise UnknownSourceTypeError(f"sources[].type: {kind!r} is not one of {', '.join(sorted(CONNECTORS))}")
    return found
