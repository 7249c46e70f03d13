"""The ``pausemesh`` command line: ``main`` parses and dispatches (``cli.main``), one module
per command group beside it."""

from pausemesh.cli.main import main

__all__ = ("main",)
