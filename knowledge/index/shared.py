"""The embedded store's searches for several web processes: its owner serves them over a local socket.

Qdrant Edge may be opened by one process only (vectorstore.EdgeStore takes a lock). With one web process, every
request's Python runs under that one process's GIL, which caps retrieves at about 60 a second on any number of
cores. So the web process that owns the store also answers the *read* calls of the other web processes (search,
hybrid, count, ids, and deleting a source's points) on a Unix socket, and those use `OwnerStore`, which forwards
them: each web process then does its own HTTP, SQL, ranking and serialisation, and only the engine call crosses
the socket.

The socket is in Linux's abstract namespace (no file to clean up, no path length limit), named after the store's
folder; a client must prove it knows a key derived from SECRET_KEY before anything is unpickled
(multiprocessing.connection's HMAC handshake). Writes never go through here: other processes leave them in SQL
for the owner's indexer (indexer.py), as the CLI and the job workers always did.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from django.conf import settings

from inference.embedders import EmbedderIdentity
from knowledge.index.vectorstore import Hit, Legs, Scope, StoreBusy, StorePoint, VectorStore

logger = logging.getLogger(__name__)

OWNER_WAIT_S = 10.0  # how long a search waits for an owner that is starting or being replaced
# Reads, and deleting a source's or a tenant's points (a request deleting a source cannot wait for the indexer).
# Upserts and payload changes stay with the owner's indexer, the one writer of new versions.
CALLS = frozenset({"search", "hybrid", "count", "ids", "ensure_collection", "delete"})


def _address(root: Path) -> str:
    return "\0ragsite-store-" + hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:32]


def _authkey(root: Path) -> bytes:
    return hmac.new(settings.SECRET_KEY.encode(), f"store:{Path(root).resolve()}".encode(), hashlib.sha256).digest()


class StoreServer:
    """In the owner: a thread accepting connections, a thread per connection (a client process keeps one per
    thread), each answering read calls on the owner's store until the client goes away."""

    def __init__(self, store: VectorStore, root: Path) -> None:
        self.store = store
        self.address, self.authkey = _address(root), _authkey(root)
        self.closing = False
        # A client process opens one connection per thread, all at once under load: the default backlog (1) would
        # refuse most of them.
        self.listener = Listener(self.address, family="AF_UNIX", backlog=128, authkey=self.authkey)
        self.thread = threading.Thread(target=self._accept, name="ragsite-store-server", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection = self.listener.accept()
            except OSError:  # closed
                return
            except Exception:  # a client that failed the handshake: refused, the server goes on
                logger.warning("A connection to the store's socket was refused (wrong key)")
                continue
            if self.closing:  # the wake-up call of close()
                connection.close()
                return
            threading.Thread(target=self._serve, args=(connection,), name="ragsite-store-call", daemon=True).start()

    def _serve(self, connection: Connection) -> None:
        with connection:
            while True:
                try:
                    method, args, kwargs = connection.recv()
                except (EOFError, OSError):
                    return
                try:
                    if method not in CALLS:
                        raise StoreBusy(f"The store's owner does not take {method!r} from other processes.")
                    connection.send(("ok", getattr(self.store, method)(*args, **kwargs)))
                except StoreBusy as exc:
                    connection.send(("busy", str(exc)))
                except Exception as exc:
                    logger.exception("A shared store call failed: %s", method)
                    connection.send(("error", f"{type(exc).__name__}: {exc}"))

    def close(self) -> None:
        """Stop accepting: one last connection of our own wakes the thread blocked in accept(), which sees `closing`
        and returns; then the listening socket is closed."""
        self.closing = True
        with contextlib.suppress(OSError, EOFError, AuthenticationError):
            Client(self.address, family="AF_UNIX", authkey=self.authkey).close()
        self.listener.close()
        self.thread.join(timeout=5)


class OwnerStore:
    """A web process that does not own the embedded store: reads and deletes are forwarded to the owner; upserts
    and payload changes are refused with StoreBusy, which the indexer already handles (the owner's indexer applies
    them from SQL)."""

    def __init__(self, root: Path) -> None:
        self.address, self.authkey = _address(root), _authkey(root)
        self._local = threading.local()

    def _connection(self) -> Connection:
        """This thread's connection; while the owner is starting (loading a large store takes seconds) or being
        replaced, it is waited for up to OWNER_WAIT_S, then StoreBusy (a 503 with Retry-After)."""
        connection = getattr(self._local, "connection", None)
        deadline = time.monotonic() + OWNER_WAIT_S
        while connection is None:
            try:
                connection = self._local.connection = Client(self.address, family="AF_UNIX", authkey=self.authkey)
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise StoreBusy(f"The embedded vector store's owner process is not reachable ({exc}).") from exc
                time.sleep(0.1)
        return connection

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        for attempt in (1, 2):  # a connection the owner dropped (it restarted) is opened again, once
            try:
                connection = self._connection()
                connection.send((method, args, kwargs))
                status, value = connection.recv()
            except (OSError, EOFError) as exc:
                self._local.connection = None
                if attempt == 2:
                    raise StoreBusy(f"The embedded vector store's owner process is not reachable ({exc}).") from exc
                continue
            if status == "ok":
                return value
            if status == "busy":
                raise StoreBusy(value)
            raise RuntimeError(f"The store's owner failed: {value}")
        raise AssertionError("unreachable")

    def ensure_collection(self, identity: EmbedderIdentity) -> None:
        self._call("ensure_collection", identity)

    def search(self, identity: EmbedderIdentity, scope: Scope, **kwargs: Any) -> list[Hit]:
        return self._call("search", identity, scope, **kwargs)

    def hybrid(self, identity: EmbedderIdentity, scope: Scope, **kwargs: Any) -> Legs:
        return self._call("hybrid", identity, scope, **kwargs)

    def count(self, identity: EmbedderIdentity, scope: Scope) -> int:
        return self._call("count", identity, scope)

    def ids(self, identity: EmbedderIdentity, scope: Scope) -> set[str]:
        return self._call("ids", identity, scope)

    def upsert(self, identity: EmbedderIdentity, points: list[StorePoint]) -> None:
        raise StoreBusy("The embedded vector store is owned by another web process; it indexes from SQL.")

    def delete(self, identity: EmbedderIdentity, scope: Scope) -> None:
        self._call("delete", identity, scope)

    def set_payload(self, identity: EmbedderIdentity, scope: Scope, payload: dict[str, Any]) -> None:
        raise StoreBusy("The embedded vector store is owned by another web process; it indexes from SQL.")

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None
