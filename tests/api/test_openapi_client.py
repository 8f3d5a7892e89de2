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
