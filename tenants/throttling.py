"""Throttles: per-API-key request rates (RAG_API_RATE, e.g. "600/min": that many requests in a window opened by the
first), and fixed-window counts of wrong API keys per address and of password-reset requests, all in the counters
every web process shares (tenants/counters.py: Redis, or a small SQLite file), so RAG_WEB_WORKERS=N never
multiplies a limit.

The client is the connection's address (REMOTE_ADDR). X-Forwarded-For is read only when that address is one of
RAG_TRUSTED_PROXIES, and then from the right: the first address that is not a trusted proxy is the client. A
client cannot pick its own address by sending the header, on any door (REST, Dify, /v1, MCP, the sign-in pages)."""

from __future__ import annotations

import ipaddress
import time
from functools import cache as memoized
from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from tenants import counters

if TYPE_CHECKING:  # DRF imports this module while it loads APIView: no runtime import of views
    from rest_framework.request import Request
    from rest_framework.views import APIView

from tenants.models import ApiKey


@memoized
def _trusted_networks(proxies: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(p.strip(), strict=False) for p in proxies if p.strip())


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in _trusted_networks(tuple(settings.RAG_TRUSTED_PROXIES)))


def client_address(request: Any) -> str:
    """The address a request comes from, for every throttle and log line: REMOTE_ADDR, unless it is a trusted
    proxy; then the right-most X-Forwarded-For entry that is not a trusted proxy (a client may put anything on the
    left of that header; only what the proxies appended counts)."""
    meta = request.META
    address = str(meta.get("REMOTE_ADDR") or "")
    if not settings.RAG_TRUSTED_PROXIES or not _trusted(address):
        return address
    hops = [hop.strip() for hop in str(meta.get("HTTP_X_FORWARDED_FOR") or "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop):
            return hop
    return hops[0] if hops else address


class ApiKeyRateThrottle(SimpleRateThrottle):
    """RAG_API_RATE requests per key (or signed-in user) in a fixed window opened by the first: one shared atomic
    count per request, where DRF's own keeps a per-process list of every request's time."""

    scope = "api_key"
    num_requests: int
    duration: int

    def get_ident(self, request: Request) -> str:
        return client_address(request)

    def allow_request(self, request: Request, view: APIView) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.count, self.started = counters.hit(self.key, self.duration)
        return self.count <= self.num_requests

    def wait(self) -> float | None:
        return max(1.0, self.started + self.duration - time.time())

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if isinstance(request.auth, ApiKey):
            return self.cache_format % {"scope": self.scope, "ident": f"key-{request.auth.pk}"}
        user = request.user
        if user is not None and user.is_authenticated:
            return self.cache_format % {"scope": self.scope, "ident": f"user-{user.pk}"}
        return None


def window_count(counter: str, window: int) -> int:
    """One more event under `counter`, in a fixed window of `window` seconds that opens at its first event (wrong API
    keys from an address, password-reset requests); returns the count so far."""
    return counters.hit(counter, window)[0]


def window_wait(counter: str, window: int) -> int:
    """Seconds until the counter's window closes (at least 1): the Retry-After of a refusal."""
    opened = counters.peek(counter)
    started = opened[1] if opened else time.time()
    return max(1, int(started + window - time.time()))


def window_reached(counter: str, limit: int) -> bool:
    """Whether the counter's open window already holds `limit` events."""
    opened = counters.peek(counter)
    return opened is not None and opened[0] >= limit
