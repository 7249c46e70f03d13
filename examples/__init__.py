"""Runnable examples of embedding PauseMesh in an existing ASGI app (see README.md)."""
