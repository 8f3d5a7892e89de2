"""(placeholder: being written)"""

from typing import Any


class ModelPool:
    def __init__(self, platform: Any) -> None:
        self.platform = platform

    async def close(self) -> None:
        return None
