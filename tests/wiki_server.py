"""A real DokuWiki for tests and benches: Debian's `dokuwiki` package copied into a folder of its own (its code, its
configuration and an empty data directory), served by PHP's built-in server on a free loopback port. People edit it
and its administrator changes its rights through its own XML-RPC API, as they would through its pages.

Needs Debian's dokuwiki, php-cli and php-xml (scripts/_connectors.sh installs them for the test command)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import xmlrpc.client
from pathlib import Path

from tests.servers import INHERITED_NOT, free_port, stop

PACKAGE = Path("/usr/share/dokuwiki")
CONFIG = Path("/etc/dokuwiki")
DATA = Path("/var/lib/dokuwiki/data")
ADMIN = ("wikiadmin", "admin-secret-1")
CONNECTOR = ("ragsite", "reader-secret-1")


def available() -> bool:
    return (PACKAGE / "doku.php").is_file() and shutil.which("php") is not None


class DokuWiki:
    """One wiki: `users` {name: (password, groups)} besides its admin and the connector's reading account (in group
    `reader`, the only group besides `admin` the API admits), `rules` its ACL lines (scope, who, level)."""

    def __init__(self, root: Path, users: dict[str, tuple[str, list[str]]], rules: list[tuple[str, str, int]]):
        self.root = root / "dokuwiki"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen | None = None
        wiki = self.root
        shutil.copytree(PACKAGE, wiki, symlinks=False, ignore=shutil.ignore_patterns(".htaccess"))
        shutil.copytree(CONFIG, wiki / "conf", ignore=shutil.ignore_patterns("farm", "*.conf.php.example"))
        shutil.copytree(DATA, wiki / "data")
        (wiki / "inc" / "preload.php").write_text(f"<?php\ndefine('DOKU_CONF', '{wiki}/conf/');\n")
        (wiki / "conf" / "local.php").write_text(
            "<?php\n"
            f"$conf['savedir'] = '{wiki}/data';\n"
            "$conf['useacl'] = 1;\n$conf['superuser'] = '@admin';\n$conf['authtype'] = 'authplain';\n"
            "$conf['remote'] = 1;\n$conf['remoteuser'] = '@admin,@reader';\n$conf['updatecheck'] = 0;\n"
            "$conf['recent'] = 200;\n"
        )
        everyone = {ADMIN[0]: (ADMIN[1], ["admin", "user"]), CONNECTOR[0]: (CONNECTOR[1], ["reader", "user"]), **users}
        (wiki / "conf" / "users.auth.php").write_text(
            "".join(
                f"{name}:{hashlib.md5(password.encode()).hexdigest()}:{name.title()}:{name}@example.com:"
                f"{','.join(groups)}\n"
                for name, (password, groups) in everyone.items()
            )
        )
        (wiki / "conf" / "acl.auth.php").write_text(
            "".join(f"{scope}\t{who}\t{level}\n" for scope, who, level in rules)
        )

    def start(self) -> DokuWiki:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(INHERITED_NOT)},
            "PHP_CLI_SERVER_WORKERS": "2",
        }
        self.process = subprocess.Popen(
            ["php", "-S", f"127.0.0.1:{self.port}", "-t", str(self.root)],
            cwd=self.root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.base + "doku.php", timeout=2).read()
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        raise AssertionError("DokuWiki did not start")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def api(self, user: tuple[str, str] = ADMIN) -> xmlrpc.client.ServerProxy:
        return xmlrpc.client.ServerProxy(f"http://{user[0]}:{user[1]}@127.0.0.1:{self.port}/lib/exe/xmlrpc.php")

    def edit(self, page: str, text: str, summary: str, user: tuple[str, str] = ADMIN, *, wait: bool = True) -> None:
        """A person saves a page. DokuWiki numbers revisions by the second: `wait` lets the next save of the same
        page be a revision of its own."""
        assert self.api(user).wiki.putPage(page, text, {"sum": summary})
        if wait:
            time.sleep(1.05)

    def grant(self, scope: str, who: str, level: int) -> None:
        """The wiki's administrator sets a rule, as its ACL manager does."""
        assert self.api().plugin.acl.addAcl(scope, who, level)

    def revoke(self, scope: str, who: str) -> None:
        assert self.api().plugin.acl.delAcl(scope, who)
