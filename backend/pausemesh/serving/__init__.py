"""Serving a process: the app under uvicorn (one process or N workers on one port), its
logging, the HTTP protocol, process tuning and the drain on stop signals."""
