"""The REST API fuzzed from its own OpenAPI schema with schemathesis: no 500s, no response that breaks the schema.

In-process (Django's WSGI handler, the test database), with a write key of a tenant that has documents, so
generated requests reach the handlers instead of stopping at 401/404. `answer` runs the real 0.5B model, so
it gets fewer examples.
"""

from __future__ import annotations

import itertools

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tenants.services import api_key_issue
from tests.factories import make_folder_source

pytestmark = pytest.mark.slow


@pytest.fixture
def api_schema(db):  # type: ignore[no-untyped-def]
    """The schema, served by the app itself. Requests run inside the test's transaction, so the connection must
    not be closed after each one (Django's own test client disconnects the same two handlers)."""
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application())
    finally:
        for signal in (signals.request_started, signals.request_finished):
            signal.connect(close_old_connections)


@pytest.fixture
def fuzz_key(tenant_a, tmp_path) -> str:  # type: ignore[no-untyped-def]
    files = {f"guide-{n}.md": f"# Guide {n}\n\nRotate the API key every {n + 1} months.\n" for n in range(3)}
    make_folder_source(tenant=tenant_a, root=tmp_path / "guides", files=files)
    return api_key_issue(tenant=tenant_a)[1]


def test_no_generated_request_gets_a_server_error_or_an_off_schema_response(api_schema, fuzz_key, chat_model):
    headers = {"Authorization": f"Api-Key {fuzz_key}"}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 20  # every documented operation is fuzzed

    for operation, mode in itertools.product(operations, GenerationMode):  # valid inputs, then invalid ones
        examples = 3 if operation.path.endswith("/answer/") else 15  # answer runs the real model

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                  database=None)  # fmt: skip
        def check(case):  # type: ignore[no-untyped-def]
            if "tenant_slug" in (case.path_parameters or {}):
                case.path_parameters["tenant_slug"] = "acme"  # reach the handlers, not only the 404 of a tenant
            case.call_and_validate(headers=headers, checks=[not_a_server_error, response_schema_conformance])

        try:
            check()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE, operation.label  # nothing in this operation can be made invalid
