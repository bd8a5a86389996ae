"""A fleet on loopback for the tests and benchmarks/bench_fleet.py: ``eddi-rag serve --no-worker`` replicas and
``eddi-rag worker`` processes, each a process of its own, sharing one state on PostgreSQL (a schema of its own)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg

from tests.support.ports import free_port
from tests.support.waiting import answering

ROOT = Path(__file__).resolve().parents[2]


class Fleet:
    def __init__(self, postgres_url: str, folder: Path, **env: str):
        self.postgres_url, self.folder = postgres_url, folder
        self.schema = f"fleet_{uuid.uuid4().hex[:12]}"
        self.state_url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={self.schema}"
        self.env = {**os.environ, "EDDI_RAG_STATE_URL": self.state_url, **env}
        self.env.pop("EDDI_RAG_TEST_STATE", None)
        self.processes: dict[str, subprocess.Popen] = {}
        self.urls: dict[str, str] = {}
        self.client = httpx.Client(timeout=10)  # (one for its looks: httpx.get makes a client, and its TLS context, each call)

    def start(self, role: str, name: str) -> str:
        """Start ``eddi-rag serve --no-worker`` (role ``serve``) or ``eddi-rag worker`` as ``name``; its URL."""
        port = free_port()
        data = self.folder / name
        args = [sys.executable, "-m", "eddi_rag.cli", role, "--port", str(port), "--data-dir", str(data), "--log-format", "text"]
        if role == "serve":  # one process a replica: what a replica's /health/ready says is then true of all it serves
            args += ["--no-worker", "--processes", "1"]
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the process writes it until it ends
        self.processes[name] = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.urls[name] = f"http://127.0.0.1:{port}"
        return self.urls[name]

    def wait_ready(self, *names: str, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        for name in names:
            try:
                answering(f"{self.urls[name]}/health/ready", self.processes[name], name, max(0.0, deadline - time.monotonic()))
            except AssertionError as e:
                raise AssertionError(f"{e}: {self.log(name)[-2000:]}") from None

    def ready(self, name: str) -> dict[str, Any]:
        return self.client.get(f"{self.urls[name]}/health/ready").json()

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def kill(self, name: str) -> None:
        """SIGKILL: no shutdown of any kind."""
        process = self.processes.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def pid(self, name: str) -> int:
        return self.processes[name].pid

    def state(self, sql: str, params: Any = ()) -> list[tuple]:
        """Read the fleet's state as it is in PostgreSQL."""
        with psycopg.connect(self.postgres_url, autocommit=True) as c:
            c.execute(f"SET search_path TO {self.schema}")
            cursor = c.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def store(self, sql: str, params: Any = ()) -> list[tuple]:
        """Read the knowledge bases' pgvector tables (the public schema)."""
        with psycopg.connect(self.postgres_url, autocommit=True) as c:
            return c.execute(sql, params).fetchall()

    def close(self) -> None:
        self.client.close()
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes.clear()
