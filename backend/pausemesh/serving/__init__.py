"""Serving a process: the uvicorn HTTP protocol, process tuning, the drain on stop signals."""
