"""A free TCP port of 127.0.0.1, for a server a test starts.

Two hazards of the usual ``bind(0)``, close, hand the port on: another test process can be handed the same port
before either server binds it, and the kernel can give it to some process's outgoing connection as its source port
meanwhile (both seen as one test's server answering another's requests). So a port comes from below the kernel's
ephemeral range, which it never gives to an outgoing connection, and is claimed by an exclusive file in the folder
the test processes share (tests/support/once.py): no two test processes, nor two calls, get the same one."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

from tests.support import once

LOWEST = 20_000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default; IANA's begins at 49,152


def free_port() -> int:
    end = _ephemeral_start()
    claims = once.shared_folder() / "ports"
    claims.mkdir(exist_ok=True)
    ports = list(range(LOWEST, end))
    first = random.SystemRandom().randrange(len(ports))  # different processes start at different places
    for port in ports[first:] + ports[:first]:
        try:
            os.close(os.open(claims / str(port), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue  # another test process's (or an earlier call's)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use by something else: stays claimed, never tried again
        return port
    raise RuntimeError(f"no free port of 127.0.0.1 between {LOWEST} and {end}")
