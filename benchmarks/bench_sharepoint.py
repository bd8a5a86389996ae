"""A SharePoint drive of N files (a fake of Microsoft Graph on loopback, tests/support/fake_graph.py): the first sync,
then a delta of 10 changes (5 changed, 3 added, 2 deleted) through the cursor, against its peer in the same run: the
same 10 changes found by a full relisting (the cursor reset; unchanged files known by their eTag, not downloaded).
Prints seconds, Graph requests and downloads for each, and the delta's ratio to the relisting; asserts nothing on time.

    .venv/bin/python benchmarks/bench_sharepoint.py [--files 1000] [--page-size 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, FakeGraph  # noqa: E402

os.environ.setdefault("EDDI_VAULT_SP_SECRET", CLIENT_SECRET)
os.environ.setdefault("EDDI_RAG_OUTBOUND_ALLOW", "127.0.0.1/32")


def text(i: int, version: int = 0) -> bytes:
    return f"# Policy {i}\n\nPolicy number {i} (revision {version}) covers topic {i % 37} for team {i % 11}.\n".encode()


def changes(graph: FakeGraph, drive: str, n: int, round_: int) -> None:
    for i in range(5):
        graph.put(drive, f"policy-{i}.md", text(i, round_), permissions=[{"grantedToV2": {"group": {"id": "g-all"}}}])
    for i in range(3):
        graph.put(drive, f"new-{round_}-{i}.md", text(n + i, round_), permissions=[{"grantedToV2": {"group": {"id": "g-all"}}}])
    for i in range(2):
        graph.remove(drive, f"policy-{n - 1 - 2 * round_ - i}.md")


def timed(runtime, kb: str, graph: FakeGraph) -> tuple[float, int, int, object]:
    graph.requests.clear()
    start = time.perf_counter()
    run = runtime.sources.run(kb, "drive")
    took = time.perf_counter() - start
    return took, len(graph.requests), sum(r.endswith("/content") for r in graph.requests), run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--page-size", type=int, default=200)
    args = parser.parse_args()

    from eddi_rag.runtime import Runtime
    from tests.support.kbs import make_kb

    with FakeGraph(page_size=args.page_size) as graph, tempfile.TemporaryDirectory() as data:
        site = graph.site("/sites/policies", "Policies")
        drive = graph.drive(site)
        graph.groups["g-all"] = [f"u{i}" for i in range(50)]
        folder = Path(data) / "folder"
        folder.mkdir()
        for i in range(args.files):
            graph.put(drive, f"policy-{i}.md", text(i), permissions=[{"grantedToV2": {"group": {"id": "g-all"}}}])
            (folder / f"policy-{i}.md").write_bytes(text(i, 99))  # (other text: embedded anew, not from the cache)
        os.environ["EDDI_RAG_FOLDER_ROOTS"] = str(folder)
        runtime = Runtime(Path(data))
        kb = make_kb(runtime, chunkStrategy="markdown", audience="DOCUMENT_ACL", sources=[{
            "name": "Drive", "type": "sharepoint", "settings": {"tombstoneAfterMissedRuns": 1, "maxSegmentsPerRun": 10 ** 6},
            "sharepoint": {"tenantId": TENANT, "clientId": CLIENT_ID, "clientSecret": "${eddivault:SP_SECRET}",
                           "sites": ["contoso.sharepoint.com:/sites/policies"], "graphUrl": graph.url, "loginUrl": graph.url}}])
        rows = []
        took, requests, downloads, run = timed(runtime, kb, graph)
        rows.append(("first sync", took, requests, downloads, run))
        peer = make_kb(runtime, chunkStrategy="markdown", audience="DOCUMENT_ACL", sources=[{
            "name": "Drive", "folder": {"path": str(folder)}, "settings": {"maxSegmentsPerRun": 10 ** 6}}])
        start = time.perf_counter()
        ingested = runtime.sources.run(peer, "drive")
        rows.append(("peer: the same files from a folder source", time.perf_counter() - start, 0, 0, ingested))
        changes(graph, drive, args.files, 1)
        took, requests, downloads, run = timed(runtime, kb, graph)
        rows.append(("delta of 10 changes (cursor)", took, requests, downloads, run))
        changes(graph, drive, args.files, 2)
        runtime.sources.reset_cursor(kb, "drive")
        took, requests, downloads, run = timed(runtime, kb, graph)
        rows.append(("peer: the same 10 changes by a full relisting", took, requests, downloads, run))
        start = time.perf_counter()
        graph.requests.clear()
        synced = runtime.sources.sync_permissions(kb, "drive")
        permissions = (time.perf_counter() - start, len(graph.requests), synced)
        runtime.close()

    print(f"\n{args.files:,} files, Graph pages of {args.page_size}\n")
    print("| what | seconds | Graph requests | downloads | added | updated | unchanged | deleted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for what, took, requests, downloads, run in rows:
        print(f"| {what} | {took:.2f} | {requests:,} | {downloads:,} | {run.added} | {run.updated} | {run.unchanged} | {run.deleted} |")
    took, requests, synced = permissions
    print(f"| permission sync (nothing changed) | {took:.2f} | {requests:,} | 0 | — | {synced.updated} | {synced.unchanged} | — |")
    print(f"\nfirst sync / folder: {rows[0][1] / rows[1][1]:.2f}× the time; "
          f"delta / full relisting: {rows[2][1] / rows[3][1]:.3f}× the time, {rows[2][2] / rows[3][2]:.3f}× the requests")


if __name__ == "__main__":
    main()
