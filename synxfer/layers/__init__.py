"""Layers wrap a backend and return a backend: retry, limit, timeout.

The client builds the stack ``Retry -> Limit -> [Timeout] -> [user layers] ->
backend``, so a retry's backoff never holds a concurrency slot and a request's
deadline counts only its own time, not its wait for a slot.
"""

from ._base import Layer
from .limit import LimitLayer
from .retry import RetryLayer
from .timeout import TimeoutLayer

__all__ = ["Layer", "LimitLayer", "RetryLayer", "TimeoutLayer"]
