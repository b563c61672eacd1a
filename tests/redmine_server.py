"""A real Redmine for tests and benches: Debian's `redmine` package (Rails, SQLite) as an instance of its own in a
folder (its database, files, logs and secret there), served by WEBrick on a free loopback port. Its database is
migrated and given Redmine's default roles, trackers and statuses once a session (`template`), then copied for each
server. People, projects, memberships, issues and notes are made through its own REST API, as its pages would.

Needs Debian's redmine and redmine-sqlite (scripts/_connectors.sh installs them for the test command)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.servers import INHERITED_NOT, free_port, stop

PACKAGE = Path("/usr/share/redmine")
ADMIN_PASSWORD = "admin-secret-1"
SETUP = """
Setting.rest_api_enabled = '1'
Setting.default_language = 'en'
Setting.login_required = '0'
admin = User.find_by_login('admin')
admin.password = 'PASSWORD'
admin.password_confirmation = 'PASSWORD'
admin.must_change_passwd = false
admin.save!
puts "KEY=" + admin.api_key
""".replace("PASSWORD", ADMIN_PASSWORD)


def available() -> bool:
    return (PACKAGE / "bin" / "rails").is_file() and shutil.which("ruby") is not None


def _instance(folder: Path) -> dict[str, str]:
    """The environment that makes Debian's Redmine run the instance in `folder` (its REDMINE_INSTANCE is a path
    under /usr/share/redmine/instances: a relative one reaches any folder), with WEBrick added to its gems."""
    (folder / "config").mkdir(parents=True, exist_ok=True)
    for name in ("tmp", "log", "files"):
        (folder / name).mkdir(exist_ok=True)
    (folder / "config" / "database.yml").write_text(
        f"production:\n  adapter: sqlite3\n  database: {folder}/redmine.sqlite3\n  encoding: utf8\n"
    )
    secret = folder / "config" / "secret_key.txt"
    if not secret.exists():
        secret.write_text(secrets.token_hex(32))
    (folder / "Gemfile").write_text(f'eval_gemfile "{PACKAGE}/Gemfile"\ngem "webrick"\n')
    return {
        # never the test run's own configuration: Rails reads DATABASE_URL over the instance's database.yml
        **{name: value for name, value in os.environ.items() if not name.startswith(INHERITED_NOT)},
        "REDMINE_INSTANCE": os.path.relpath(folder, PACKAGE / "instances"),
        "RAILS_ENV": "production",
        "REDMINE_LANG": "en",
        "BUNDLE_GEMFILE": str(folder / "Gemfile"),
    }


def _run(env: dict[str, str], *command: str) -> str:
    done = subprocess.run(list(command), cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[:1500] + " … " + done.stderr[-1000:]
    return done.stdout


def template(folder: Path) -> tuple[Path, str]:
    """A migrated database with the default data, its admin's password set and the REST API on: (folder, admin key)."""
    env = _instance(folder)
    _run(env, "bin/rake", "db:migrate")
    _run(env, "bin/rake", "redmine:load_default_data")
    script = folder / "setup.rb"
    script.write_text(SETUP)
    out = _run(env, "bin/rails", "runner", str(script))
    key = next(line[4:].strip() for line in out.splitlines() if line.startswith("KEY="))
    return folder, key


class Redmine:
    """One Redmine, copied from a template's database and started; `admin` calls its REST API as its administrator."""

    def __init__(self, made: tuple[Path, str], folder: Path) -> None:
        self.folder = folder
        shutil.copytree(made[0], folder, ignore=shutil.ignore_patterns("log", "tmp"))
        self.key = made[1]
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen | None = None

    def start(self) -> Redmine:
        env = _instance(self.folder)
        command = ["bin/rails", "server", "-u", "webrick", "-b", "127.0.0.1", "-p", str(self.port), "-e", "production"]
        log = (self.folder / "log" / "server.log").open("w")
        self.process = subprocess.Popen(
            command, cwd=PACKAGE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.base, timeout=2).read()
                return self
            except (OSError, urllib.error.URLError):
                if self.process.poll() is not None:
                    log = (self.folder / "log" / "server.log").read_text()[-2000:]
                    raise AssertionError("Redmine exited: " + log) from None
                time.sleep(0.2)
        raise AssertionError("Redmine did not start")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            self.base + path.lstrip("/"),
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={"X-Redmine-API-Key": self.key, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
        return json.loads(text) if text.strip() else {}

    def user(self, login: str, mail: str, password: str = "pw-for-redmine-1") -> int:
        made = self.admin(
            "POST",
            "users.json",
            {
                "user": {
                    "login": login,
                    "firstname": login.title(),
                    "lastname": "Person",
                    "mail": mail,
                    "password": password,
                }
            },
        )
        return int(made["user"]["id"])

    def project(self, identifier: str, name: str, *, public: bool) -> int:
        made = self.admin(
            "POST", "projects.json", {"project": {"identifier": identifier, "name": name, "is_public": public}}
        )
        return int(made["project"]["id"])

    def member(self, project: str, user_id: int, role: str) -> int:
        roles = {r["name"]: r["id"] for r in self.admin("GET", "roles.json")["roles"]}
        made = self.admin(
            "POST",
            f"projects/{project}/memberships.json",
            {"membership": {"user_id": user_id, "role_ids": [roles[role]]}},
        )
        return int(made["membership"]["id"])

    def issue(self, project: str, subject: str, description: str, **fields: Any) -> int:
        made = self.admin(
            "POST",
            "issues.json",
            {"issue": {"project_id": project, "subject": subject, "description": description, **fields}},
        )
        return int(made["issue"]["id"])

    def update(self, issue: int, **fields: Any) -> None:
        """A journal entry: a note (private with private_notes=True), a status change, any field."""
        self.admin("PUT", f"issues/{issue}.json", {"issue": fields})
        time.sleep(1.05)  # Redmine dates its changes by the second: the next one is later
