"""The names a host imports from ``pausemesh`` are pinned, and loading them stays lazy."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pausemesh
from pausemesh.settings import Settings
from pausemesh.web.agui_starlette import StarletteAgui
from pausemesh.web.app import create_app
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.plugin import PauseMeshPlugin


def test_pausemesh_exports_exactly_the_host_facing_names() -> None:
    assert set(pausemesh.__all__) == {
        "PauseMeshConfig",
        "PauseMeshPlugin",
        "Settings",
        "StarletteAgui",
        "__version__",
        "create_app",
    }
    for name in pausemesh.__all__:
        assert name in dir(pausemesh)


def test_each_exported_name_is_the_object_its_module_defines() -> None:
    assert pausemesh.PauseMeshConfig is PauseMeshConfig
    assert pausemesh.PauseMeshPlugin is PauseMeshPlugin
    assert pausemesh.Settings is Settings
    assert pausemesh.StarletteAgui is StarletteAgui
    assert pausemesh.create_app is create_app


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'ContinuationService'"):
        _ = pausemesh.ContinuationService


@pytest.mark.parametrize("module", ["pausemesh", "pausemesh.core", "pausemesh.stores"])
def test_importing_the_package_or_the_core_loads_no_web_framework(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        "loaded = sorted(m for m in ('litestar', 'starlette', 'uvicorn') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""


def test_settings_load_reads_the_environment_like_load_settings() -> None:
    loaded = Settings.load(environ={"PAUSEMESH_PORT": "9999"}, env_file=None)
    assert loaded.port == 9999
