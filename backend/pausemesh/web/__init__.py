"""The web layer: the Litestar app factory, the plugin, routes and problem details."""

from pausemesh.web.app import create_app
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.plugin import PauseMeshPlugin

__all__ = ("PauseMeshConfig", "PauseMeshPlugin", "create_app")
