"""A real IMAP server for the imap source's tests: Debian's Dovecot (``dovecot-imapd``, which scripts/test installs),
started in the foreground on a free port of 127.0.0.1 with a configuration of its own in a temporary folder (plain
IMAP on loopback, one user, Maildir), and stopped afterwards. Mails go in over IMAP's APPEND, as a client puts them."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

USER, PASSWORD = "alice", "mail-secret"


@dataclass
class Mailbox:
    host: str
    port: int

    def client(self):
        from imapclient import IMAPClient

        client = IMAPClient(self.host, port=self.port, ssl=False, timeout=10)
        client.login(USER, PASSWORD)
        return client




@contextmanager
def dovecot() -> Iterator[Mailbox]:
    binary = shutil.which("dovecot") or "/usr/sbin/dovecot"
    if not os.path.exists(binary):
        raise RuntimeError("Dovecot is not installed: scripts/test installs Debian's dovecot-imapd")
    root = Path(tempfile.mkdtemp(prefix="eddi-rag-dovecot-"))
    port = free_port()
    if os.getuid() == 0:  # Dovecot's own users for its processes, nobody's for the mail
        internal, login, mail = "dovecot", "dovenull", pwd.getpwnam("nobody")
    else:
        me = pwd.getpwuid(os.getuid())
        internal, login, mail = me.pw_name, me.pw_name, me
    (root / "mail").mkdir()
    os.chown(root / "mail", mail.pw_uid, mail.pw_gid)
    os.chmod(root, 0o755)
    (root / "users").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
    (root / "dovecot.conf").write_text(f"""
protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
instance_name = eddi-rag-{port}
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {internal}
default_login_user = {login}
first_valid_uid = 1
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = static
  args = uid={mail.pw_uid} gid={mail.pw_gid} home={root}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
""")
    process = subprocess.Popen([binary, "-F", "-c", str(root / "dovecot.conf")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (root / "dovecot.log").read_text() if (root / "dovecot.log").exists() else ""
                    raise RuntimeError(f"Dovecot did not start: {process.stderr.read().decode() if process.stderr else ''} {log}") from None
                time.sleep(0.1)
        yield Mailbox("127.0.0.1", port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(root, ignore_errors=True)
