"""A real IMAP server for tests and benches: Debian's Dovecot with its ACL plugins (RFC 4314), run in the foreground
on a free loopback port with a configuration, users and maildirs of its own in a folder. A shared namespace lets each
user open what another's ACLs grant them (`shared/<owner>/<folder>`), so a test can check what Dovecot itself admits.

Needs Debian's dovecot-imapd (scripts/_connectors.sh installs it for the test command)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from email.message import EmailMessage
from pathlib import Path

from imapclient import IMAPClient

from tests.servers import free_port, stop

CONFIG = """
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = 1
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/passwd
}}
mail_location = maildir:~/Maildir
mail_plugins = acl
protocol imap {{
  mail_plugins = $mail_plugins imap_acl
}}
plugin {{
  acl = vfile
  acl_anyone = allow
}}
namespace inbox {{
  inbox = yes
  separator = /
}}
namespace shared {{
  type = shared
  separator = /
  prefix = shared/%%u/
  location = maildir:{root}/home/%%u/Maildir:INDEXPVT=~/Maildir/shared/%%u
  subscriptions = no
  list = children
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
service pop3-login {{
  inet_listener pop3 {{
    port = 0
  }}
}}
service submission-login {{
  inet_listener submission {{
    port = 0
  }}
}}
"""


def available() -> bool:
    return Path("/usr/sbin/dovecot").is_file() and Path("/usr/lib/dovecot/modules/lib01_acl_plugin.so").is_file()


class Dovecot:
    """One server: `users` {login: (password, acl groups)}; `owner` is the shared mailbox's own account."""

    def __init__(self, users: dict[str, tuple[str, list[str]]], owner: tuple[str, str]) -> None:
        # Dovecot's own users read its files: a folder they can reach (pytest's temporary folders are root's alone)
        self.root = Path(tempfile.mkdtemp(prefix="ragsite-dovecot-"))
        self.root.chmod(0o755)
        self.port = free_port()
        self.owner = owner
        self.passwords = {**{login: pw for login, (pw, _g) in users.items()}, owner[0]: owner[1]}
        for name in ("run", "state", "home"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        (self.root / "dovecot.conf").write_text(CONFIG.format(root=self.root, port=self.port))
        entries = {**users, owner[0]: (owner[1], [])}
        (self.root / "passwd").write_text("".join(
            f"{login}:{{PLAIN}}{pw}:65534:65534::{self.root}/home/{login}::userdb_acl_groups={','.join(groups)}\n"
            for login, (pw, groups) in entries.items()))  # fmt: skip
        shutil.chown(self.root / "home", "nobody", "nogroup")
        self.process: subprocess.Popen | None = None

    def start(self) -> Dovecot:
        self.process = subprocess.Popen(
            ["/usr/sbin/dovecot", "-F", "-c", str(self.root / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.session(*self.owner).logout()
                return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError("Dovecot did not start: " + (self.root / "dovecot.log").read_text()[-2000:])

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def session(self, login: str, password: str | None = None) -> IMAPClient:
        client = IMAPClient("127.0.0.1", port=self.port, ssl=False, timeout=10)
        client.login(login, password or self.passwords[login])
        return client

    def deliver(self, folder: str, subject: str, body: str, *, sender: str = "customer@example.com",
                message_id: str, replying_to: list[str] | None = None, when: str = "Mon, 07 Dec 2026 09:00:00 +0000",
                attachment: tuple[str, bytes] | None = None) -> None:  # fmt: skip
        """A message arrives in the shared mailbox's folder (made when missing)."""
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = sender, "support@acme.test", subject
        message["Message-ID"], message["Date"] = message_id, when
        if replying_to:
            message["In-Reply-To"], message["References"] = replying_to[-1], " ".join(replying_to)
        message.set_content(body)
        if attachment:
            message.add_attachment(attachment[1], maintype="text", subtype="plain", filename=attachment[0])
        client = self.session(*self.owner)
        if not client.folder_exists(folder):
            client.create_folder(folder)
        client.append(folder, message.as_bytes())
        client.logout()

    def share(self, folder: str, who: str, rights: str) -> None:
        """The mailbox's owner sets a folder's ACL entry (SETACL; "" removes it)."""
        client = self.session(*self.owner)
        if not client.folder_exists(folder):
            client.create_folder(folder)
        if rights:
            client.setacl(folder, who, rights)
        else:
            client._imap.deleteacl(folder, who)  # RFC 4314 DELETEACL (IMAPClient sends SETACL only)
        client.logout()

    def may_read(self, login: str, folder: str) -> bool:
        """What Dovecot itself lets this user do: open the shared folder and read it."""
        client = self.session(login)
        try:
            client.select_folder(f"shared/{self.owner[0]}/{folder}", readonly=True)
            return True
        except Exception:  # noqa: BLE001  (Dovecot refuses: no such mailbox, or no right)
            return False
        finally:
            client.logout()
