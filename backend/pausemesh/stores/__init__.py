"""Store adapters for the core's ports, a folder per backend.

``memory/`` (the fake for tests), ``sqlite/`` (the embedded default) and ``postgres/`` (several
replicas on one database); ``storage.py``, ``batch.py``, ``migrations.py`` and
``thread_notify.py`` are shared by the backends. Import a backend from its package, e.g.
``from pausemesh.stores.sqlite import open_sqlite_store``.
"""
