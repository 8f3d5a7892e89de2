"""Write the server's OpenAPI document to frontend/openapi.json (the dashboard's typed client
is generated from it: `npm run gen:api` in frontend/). A test fails when it is stale."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from thinker.server.app import create_app

TARGET = Path(__file__).resolve().parents[1] / "frontend" / "openapi.json"


def openapi_text() -> str:
    spec = create_app().other_asgi_app.openapi()
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    TARGET.write_text(openapi_text())
    print(f"wrote {TARGET}", file=sys.stderr)
