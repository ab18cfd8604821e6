from .core import Engine, Job, Run

__all__ = ["Engine", "Job", "Run"]
