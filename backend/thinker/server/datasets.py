"""(placeholder: being written)"""

from typing import Any


async def register_examples(platform: Any) -> None:
    return None
