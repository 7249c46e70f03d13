"""The ``pausemesh`` command line: ``main`` parses and dispatches (``cli.main``), one module
per command group beside it (``serve``, ``workers``, ``gateway``, ``ops``, ``inspect``,
``keys``, ``migrate``, ``purge``), what they share in ``cli.options``."""

from pausemesh.cli.main import main

__all__ = ("main",)
