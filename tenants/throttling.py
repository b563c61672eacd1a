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
    count per request (`rate_hit`, which the MCP door counts with too), where DRF's own keeps a per-process list of
    every request's time."""

    scope = "api_key"
    waiting: int | None = None

    def __init__(self) -> None:  # the rate is read at each request (rate_hit), not parsed once here
        pass

    def allow_request(self, request: Request, view: APIView) -> bool:
        if isinstance(request.auth, ApiKey):
            ident = f"key-{request.auth.pk}"
        elif request.user is not None and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            return True
        self.waiting = rate_hit(ident)
        return self.waiting is None

    def wait(self) -> float | None:
        return self.waiting


def rate_hit(ident: str) -> int | None:
    """One request of `ident` (`key-<pk>`, `user-<pk>`) counted against RAG_API_RATE; the seconds until its window
    closes when it is past the rate, None within it."""
    rate = ApiKeyRateThrottle.THROTTLE_RATES.get(ApiKeyRateThrottle.scope)
    if rate is None:
        return None
    number, duration = SimpleRateThrottle.parse_rate(None, rate)  # type: ignore[arg-type]  # reads no state
    if number is None or duration is None:
        return None
    count, started = counters.hit(f"throttle_{ApiKeyRateThrottle.scope}_{ident}", duration)
    return None if count <= number else max(1, int(started + duration - time.time()))


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
