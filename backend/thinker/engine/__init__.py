"""The Tinker-shaped engine: `ServiceClient` and the futures its calls return."""

from thinker.engine.futures import EngineFuture
from thinker.engine.service import ServiceClient

__all__ = ["EngineFuture", "ServiceClient"]
