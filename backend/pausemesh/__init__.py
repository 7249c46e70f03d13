"""PauseMesh: durable pauses for agents, resumed exactly once."""

__version__ = "0.1.0"

__all__ = ("__version__",)
