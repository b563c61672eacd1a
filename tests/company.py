"""The company the access tests share (tests/test_permissions.py, tests/test_access_relations.py): `handbook` open
to the tenant and `hr-files` open to group:hr only. hanna is staff in hr, sam is staff outside it, alice is an admin.
Keys act for tenant, for group:hr, for user:hanna and for all. A canary string is planted only in the restricted
document (and in the name of a file its job skipped). The `company` fixture (tests/conftest.py) builds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rest_framework.test import APIClient

from tests.factories import CommittingClientMixin, make_folder_source, make_member

CANARY = "quokka7731zebra"
HANDBOOK = {
    "handbook.md": "# Support handbook\n\nSupport answers every ticket within one business day.\n\n"
    "## Pay\n\nQuestions about salary bands go to the HR team, never to support.\n",
}
HR = {
    "salaries.md": f"# Salary bands\n\nThe salary band for a senior engineer is 92,000 euros a year. "
    f"Reference {CANARY}.\n",
}
QUESTION = "What is the salary band for a senior engineer?"


class CommittingAPIClient(CommittingClientMixin, APIClient):
    pass


def _from_the_directory(tenant_a: Any, keys: dict[str, str]) -> dict[str, Any]:
    """People the company's provider sends (identity.people, as an OIDC or SAML sign-in or a directory sync does):
    pia, provisioned into `hr` through the provider's `HR Team`; dora, provisioned into it and then deprovisioned
    (with a key that acted for her); remy, deprovisioned and provisioned again outside `hr`."""
    from identity import people
    from identity.models import Provider
    from tenants.services import api_key_issue, member_deprovision

    provider = Provider.objects.create(tenant=tenant_a, name="Okta", slug="okta", issuer="https://idp.example",
                                       client_id="c", group_map={"HR Team": "hr"})  # fmt: skip

    def admit(name: str, groups: list[str]) -> Any:
        return people.admit(provider, people.Person(subject=f"00u-{name}", username=name, groups=groups))

    pia, dora, remy = admit("pia", ["HR Team"]), admit("dora", ["HR Team"]), admit("remy", ["HR Team"])
    keys["key-user-deprovisioned"] = api_key_issue(tenant=tenant_a, name="dora's", scope="read",
                                                   acts_for=["user:dora"])[1]  # fmt: skip
    for leaver in (dora, remy):
        member_deprovision(tenant=tenant_a, user=leaver, by="oidc okta")
    admit("remy", [])
    return {"pia": pia, "dora": dora, "remy": remy}


def build_company(tenant_a: Any, admin_a: Any, tmp_path: Path) -> dict[str, Any]:
    from knowledge import services
    from knowledge.index import indexer
    from knowledge.ingest import pipeline
    from knowledge.models import Document, Source
    from tenants.services import api_key_issue, group_create, group_member_add

    hr = group_create(tenant=tenant_a, name="hr")
    hanna, sam = make_member(tenant_a, username="hanna"), make_member(tenant_a, username="sam")
    group_member_add(tenant=tenant_a, actor=None, group=hr, user=hanna)
    make_folder_source(tenant=tenant_a, root=tmp_path / "handbook", files=HANDBOOK, name="handbook")
    root = tmp_path / "hr"
    root.mkdir()
    (root / "salaries.md").write_text(HR["salaries.md"])
    (root / f"{CANARY}.bin").write_bytes(b"\x00\x01binary")  # skipped: its name is in the job's report
    hr_source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="hr-files", path=root)
    services.source_set_access(tenant=tenant_a, source=hr_source, access=["group:hr"])
    pipeline.sync_folder(source=hr_source, root=root)
    indexer.drain()
    keys = {
        name: api_key_issue(tenant=tenant_a, name=name, scope="read", acts_for=acts_for)[1]
        for name, acts_for in (("key-tenant", None), ("key-group", ["group:hr"]), ("key-user", ["user:hanna"]),
                               ("key-all", ["all"]))
    }  # fmt: skip
    directory = _from_the_directory(tenant_a, keys)
    return {
        "tenant": tenant_a, "hr": hr, "keys": keys,
        "users": {"alice": admin_a, "hanna": hanna, "sam": sam, **directory},
        "open": Document.objects.get(document_key="handbook.md"),
        "secret": Document.objects.get(document_key="salaries.md"),
        "hr_source": hr_source, "handbook": Source.objects.get(name="handbook"),
    }  # fmt: skip
