"""The dashboard's typed client is generated from the server's OpenAPI document; the copy in
frontend/ must be the server's current one (`python scripts/openapi.py`, then
`npm run gen:api` in frontend/)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_openapi_document_is_current() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from openapi import TARGET, openapi_text
    finally:
        sys.path.pop(0)
    assert TARGET.read_text() == openapi_text(), (
        "frontend/openapi.json is stale: run `python scripts/openapi.py` and "
        "`npm run gen:api` in frontend/"
    )


def test_every_operation_documents_the_errors_it_can_send() -> None:
    """What server/openapi_doc.py derives; the fuzzer (test_schemathesis.py) compares it with
    what the server really sends."""
    from thinker.server.app import create_app

    spec = create_app().other_asgi_app.openapi()
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # FastAPI's, never sent
    for path, operations in spec["paths"].items():
        body = "OpenAIErrorBody" if path.startswith("/v1/") else "ErrorBody"
        for method, operation in operations.items():
            responses, parameters = operation["responses"], operation.get("parameters", [])
            where = f"{method.upper()} {path}"
            errors = {s: r for s, r in responses.items() if int(s) >= 400}
            for status, response in errors.items():
                schema = response["content"]["application/json"]["schema"]
                assert body in str(schema), (where, status, schema)
            assert "WWW-Authenticate" in responses["401"]["headers"], where
            assert operation["security"] == [{"bearer": []}], where
            invalid = "400" if path.startswith("/v1/") else "422"
            assert (invalid in responses) == bool(parameters or "requestBody" in operation), where
            if path.startswith("/v1/"):
                assert "422" not in responses, where
            if any(p["in"] == "path" for p in parameters):
                assert "404" in responses, where
