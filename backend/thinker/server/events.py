"""(placeholder: being written)"""

from typing import Any


class EventHub:
    def __init__(self, platform: Any) -> None:
        self.platform = platform


def register_socket_handlers(sio: Any, app: Any) -> None:
    return None
