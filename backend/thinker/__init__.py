"""Thinker: post-training for language models on a Tinker-shaped engine, local or remote."""

from thinker.engine import EngineFuture, ServiceClient

__version__ = "0.1.0"
__all__ = ["EngineFuture", "ServiceClient", "__version__"]
