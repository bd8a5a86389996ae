"""A Git repository: its files on one branch, through git itself (GitPython), selected by include/exclude globs on their
path in the repository. The repository is cloned once into a working copy of the server's and brought up to the branch's
head before every run, so a run sees the files as the last commit left them: added, changed, and no longer there.

Every file of a supported type is a document, read by the same parsing pipeline as a folder's (a PDF, a Word or Excel
file as much as Markdown); a file's blob id is its version, so an unchanged file is never read again. ``url`` is
``https://`` (checked by the outbound guard, its host resolved before each run) or ``file://`` (a repository on the
server, inside ``EDDI_RAG_FOLDER_ROOTS`` like a folder source). Git runs with no terminal prompt and only those
protocols; a symbolic link in the repository is never followed (it is listed as a failure). A repository on the server
is cloned only when every part of it lies in the roots: a ``.git`` file's ``gitdir``, a worktree's ``commondir`` and
``objects/info/alternates`` pointing out of them are refused (git would read the repository they name). A file over
the size limit (``settings.maxBytesPerPage``, or ``EDDI_RAG_MAX_UPLOAD_MB`` when smaller) is
refused before it is read (listed as a failure naming the limit)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import Field

from eddi_rag.common import paths
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.loaders import EXTENSIONS
from eddi_rag.sources.base import (
    Connector,
    CursorExpiredError,
    Globs,
    Item,
    Listing,
    Settings,
    Sink,
    SourceContext,
    SyncEnd,
    feed,
    listed_again,
    selected,
)
from eddi_rag.sources.connectors.folder import check_folder

GIT_ENVIRONMENT = {"GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": "https:http:file", "GIT_CONFIG_NOSYSTEM": "1"}


class GitSettings(Settings):
    """A Git repository's files on one branch (every supported type), cloned once and brought to the branch's head
    before each run; a file's blob id is its version."""

    url: str = Field(pattern=r"^(https?|file)://", description=
        "https://… (the outbound guard checks its host) or file://… (a repository on the server, inside "
        "EDDI_RAG_FOLDER_ROOTS).", json_schema_extra={"x-outbound": True, "x-on-server": True})
    branch: str = Field("main", min_length=1)
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the path in the repository (* crosses folders).")
    exclude: Globs = Field(default_factory=list)



class GitSourceError(EddiRagError, ValueError):
    status = 400


def check_url(url: str, outbound: OutboundPolicy | None = None) -> None:
    """A ``file://`` repository inside the folder roots; an ``http(s)://`` one the outbound guard lets
    through (statically when saved; resolved too when ``outbound`` is given, before a run)."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        check_repository(check_folder(unquote(parts.path)))  # a repository on the server is read as a folder source is
        return
    if outbound is None:
        OutboundPolicy.check_static(url)
    else:
        outbound.check(url)


def check_repository(folder: Path) -> None:
    """Every place git would read a repository on the server from lies in the folder roots: the folder itself, a
    ``.git`` file's ``gitdir``, a ``commondir``, and each ``objects/info/alternates`` entry (GitSourceError naming
    the one that points out)."""
    allowed = paths.folder_roots()

    def inside(target: Path, what: str) -> Path:
        if not paths.inside(target.resolve(), allowed):
            raise GitSourceError(f"{what} points outside the folders sources may read (EDDI_RAG_FOLDER_ROOTS): refused, "
                                 "as git would read the repository it names")
        return target.resolve()

    git_dir = folder / ".git"
    if git_dir.is_file():
        text = git_dir.read_text(errors="replace").strip()
        if not text.startswith("gitdir:"):
            raise GitSourceError(f"{folder.name}/.git is a file that is not a gitdir link")
        git_dir = inside(folder / text.removeprefix("gitdir:").strip(), f"{folder.name}/.git (a gitdir link)")
    elif not git_dir.is_dir():
        git_dir = folder  # a bare repository
    dirs = [git_dir]
    if (git_dir / "commondir").is_file():
        dirs.append(inside(git_dir / (git_dir / "commondir").read_text(errors="replace").strip(), "its commondir"))
    for d in dirs:
        alternates = d / "objects" / "info" / "alternates"
        if alternates.is_file():
            for line in alternates.read_text(errors="replace").splitlines():
                if line.strip() and not line.startswith("#"):
                    inside(d / "objects" / line.strip(), "an entry of objects/info/alternates")


def working_copy(root: Path | None, kb_id: str, source_id: str, url: str) -> Path:
    """Where the clone of ``url`` for this source lives: under the data folder (or the temp folder)."""
    key = hashlib.sha256(f"{kb_id}\0{source_id}\0{url}".encode()).hexdigest()[:24]
    return (root or Path(tempfile.gettempdir()) / "eddi-rag") / "git" / key


def _updated(path: Path, spec: GitSettings) -> None:
    """The working copy at the head of ``spec.branch``: cloned the first time, fetched and reset after."""
    from git import GitCommandError, Repo

    try:
        if (path / ".git").is_dir():
            repo = Repo(path)
            with repo.git.custom_environment(**GIT_ENVIRONMENT):
                repo.remotes.origin.fetch(spec.branch)
                repo.git.checkout("-B", spec.branch, f"origin/{spec.branch}")
                repo.git.reset("--hard", f"origin/{spec.branch}")
                repo.git.clean("-fdx")
        else:
            if path.exists():
                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            Repo.clone_from(spec.url, path, branch=spec.branch, env={**os.environ, **GIT_ENVIRONMENT})
    except GitCommandError as e:
        reason = (e.stderr or str(e)).strip().splitlines()
        raise GitSourceError(f"git could not read branch {spec.branch!r} of {spec.url}: "
                             f"{reason[-1] if reason else 'failed'}") from e


def listing(source_id: str, spec: GitSettings, path: Path, outbound: OutboundPolicy, max_bytes: int | None = None) -> Listing:
    """The branch's files of a supported type (text), each its own document ``<source id>/<path>``; one over
    ``max_bytes`` is listed as a failure, never read."""
    check_url(spec.url, outbound)
    _updated(path, spec)
    return _files(source_id, spec, path, max_bytes)


def _files(source_id: str, spec: GitSettings, path: Path, max_bytes: int | None, only: set[str] | None = None) -> Listing:
    """The files of the working copy's head as documents (``only``: of these paths alone), each read when the sync
    engine asks for it, its blob id its version; a symbolic link or a file over ``max_bytes`` is a failure, never read."""
    from git import Repo

    out = Listing()
    for line in Repo(path).git.ls_tree("-r", "-z", "--full-tree", "HEAD").split("\0"):
        if not line:
            continue
        meta, rel = line.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind != "blob" or (only is not None and rel not in only):
            continue  # (a submodule is a commit, not a file)
        if not (Path(rel).suffix.lower() in EXTENSIONS and selected(rel, spec.include, spec.exclude)):
            continue
        if mode == "120000":  # a link in the repository may point anywhere on the server: never followed
            out.failures.append({"document": rel, "reason": "a symbolic link in the repository (never followed)"})
            continue
        if max_bytes is not None and (size := os.lstat(path / rel).st_size) > max_bytes:
            out.failures.append({"document": rel, "reason": f"{size:,} bytes, over the limit of {max_bytes:,} "
                                                            "(settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read"})
            continue
        out.items.append(Item(f"{source_id}/{rel}", rel, _reader(path / rel), version=blob))
    return out


def _reader(file: Path) -> Any:
    def read() -> tuple[bytes, None]:
        if file.is_symlink():  # (replaced by a link since it was listed)
            raise GitSourceError(f"{file.name}: a symbolic link in the repository (never followed)")
        return file.read_bytes(), None
    return read


class GitConnector(Connector[GitSettings]):
    """The cursor is the commit a sync listed: the next one reads only the files changed since (``git diff`` from it to
    the branch's head), says the files removed deleted, and names the others unchanged without reading them (``git
    ls-tree``). A cursor no longer in the branch's history (a force-push) lists the branch in full."""

    type = "git"
    configuration = GitSettings
    needs = "a repository's https URL (or a file:// one inside EDDI_RAG_FOLDER_ROOTS) and a branch"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"git {spec.url} ({spec.branch})"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        check_url(self.spec(source).url, ctx.outbound)

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        self.validate(ctx, source)  # (the listing fetched the branch: it was read)

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        from git import GitCommandError, Repo

        spec, sid = self.spec(source), source.effective_id
        path = working_copy(ctx.data_dir, ctx.kb_id, sid, spec.url)
        check_url(spec.url, ctx.outbound)
        _updated(path, spec)
        repo = Repo(path)
        head = repo.head.commit.hexsha  # the baseline, taken before anything is read
        if cursor is None:
            ended = feed(_files(sid, spec, path, ctx.max_bytes), sink)
            ended.cursor = head
            return ended
        try:
            repo.git.merge_base("--is-ancestor", cursor, head)
            changes = repo.git.diff("--name-status", "--no-renames", "-z", cursor, head).split("\0")
        except GitCommandError as e:
            raise CursorExpiredError(f"commit {cursor[:12]} is no longer in the history of {spec.branch!r}") from e
        changed: set[str] = set()
        for status, rel in zip(changes[0::2], changes[1::2]):
            if status.startswith("D"):
                sink.deleted(f"{sid}/{rel}")
            else:
                changed.add(rel)
        for rel in repo.git.ls_tree("-r", "--name-only", "-z", head).split("\0"):  # the rest: named, not read
            if rel and rel not in changed and Path(rel).suffix.lower() in EXTENSIONS and selected(rel, spec.include, spec.exclude):
                sink.unchanged(f"{sid}/{rel}")
        ended = feed(_files(sid, spec, path, ctx.max_bytes, changed), sink) if changed else SyncEnd()
        return SyncEnd(ended.complete, ended.stopped, ended.notes, head)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return listed_again(self, ctx, source, document_id, name)


CONNECTOR = GitConnector()
