"""What the tenants app tells the apps that build on it, without importing them (knowledge uses tenants, never
back): a principal is gone, so every access list naming it must forget it; a person was deprovisioned, so whatever
they still hold open must end."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside the transaction that deletes a group, with tenant= and principal= ("group:hr"). Its receivers drop
# the principal from every access list they keep (knowledge: sources and documents), so a group created later under
# the same name opens nothing the old one did; they return how many lists changed.
principal_removed = Signal()

# Sent inside the transaction that deprovisions a member (tenants.services.member_deprovision), with tenant= and
# user=. Its receivers end what the person still holds open in the tenant (knowledge: their agent sessions, and those
# of the keys revoked with them, keys=); they return how many they ended.
member_deprovisioned = Signal()
