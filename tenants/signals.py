"""What the tenants app tells the apps that build on it, without importing them (knowledge uses tenants, never
back): a principal is gone, so every access list naming it must forget it."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside the transaction that deletes a group, with tenant= and principal= ("group:hr"). Its receivers drop
# the principal from every access list they keep (knowledge: sources and documents), so a group created later under
# the same name opens nothing the old one did; they return how many lists changed.
principal_removed = Signal()
