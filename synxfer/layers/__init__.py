"""Layers wrap a backend and return a backend: retry, limit, chaos.

The client builds the stack ``Retry -> Limit -> backend`` so that a retry's
backoff never holds a concurrency slot.
"""

from ._base import Layer
from .chaos import ChaosLayer
from .limit import LimitLayer
from .retry import RetryLayer

__all__ = ["ChaosLayer", "Layer", "LimitLayer", "RetryLayer"]
