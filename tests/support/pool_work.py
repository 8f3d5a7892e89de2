"""Work functions for the actor pool's tests (tests/unit/test_pool.py): module-level, so that
a spawned actor process can import them."""

from __future__ import annotations

import os
from typing import Any


def doubling() -> Any:
    """Doubles numbers; raises on the string 'bad'; exits the process on 'die' when the file
    named by THINKER_TEST_DIE_ONCE does not yet exist (it is made first, so the retry lives)."""

    def work(items: list[Any]) -> list[Any]:
        out = []
        for item in items:
            if item == "bad":
                raise ValueError("cannot double 'bad'")
            if item == "die":
                marker = os.environ["THINKER_TEST_DIE_ONCE"]
                if not os.path.exists(marker):
                    open(marker, "w").close()  # noqa: SIM115, PTH123
                    os._exit(3)
                out.append("survived")
                continue
            out.append(item * 2)
        return out

    return work


def failing() -> Any:
    raise RuntimeError("no model here")
