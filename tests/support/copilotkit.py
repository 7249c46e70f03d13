"""The CopilotKit example (``examples/copilotkit``) as a real Node process for end-to-end tests.

``CopilotKitRuntime`` runs the example's built server (CopilotKit's runtime with PauseMesh as
its agent and the React page) like ``ServerProcess`` runs ``pausemesh``: a free port, ready
when CopilotKit's ``/info`` answers, SIGTERM or SIGKILL to stop. The build comes from
``make install`` (``npm ci`` and ``npm run build`` in the example when npm is available).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from tests.support.builds import build_missing, needs_build, wait_for_builds
from tests.support.server import REPO_ROOT, ServerProcess

__all__ = (
    "EXAMPLE",
    "NODE",
    "NODE_TESTS",
    "CopilotKitRuntime",
    "needs_copilotkit_build",
    "require_build",
)

EXAMPLE = REPO_ROOT / "examples" / "copilotkit"
SERVER = EXAMPLE / "dist" / "src" / "server.js"
PAGE = EXAMPLE / "dist" / "page" / "index.html"
NODE_TESTS = EXAMPLE / "dist" / "test"
NODE = shutil.which("node")


def require_build() -> None:
    """Fail with the reason the example cannot run (after make's builds, if under way)."""
    wait_for_builds()
    missing = build_missing("copilotkit")
    assert missing is None, missing


# Outside CI a machine without Node or the build skips with the reason; in CI the tests run and
# fail on a missing build instead of passing silently (tests/support/builds.py).
needs_copilotkit_build = needs_build("copilotkit")


class CopilotKitRuntime(ServerProcess):
    """``node dist/src/server.js`` of the example, pointed at a PauseMesh base URL."""

    def __init__(self, pausemesh_url: str, *, env: Mapping[str, str] | None = None) -> None:
        super().__init__(
            [],
            env={
                "PAUSEMESH_URL": pausemesh_url,
                "COPILOTKIT_TELEMETRY_DISABLED": "true",
                "DO_NOT_TRACK": "1",
                **(env or {}),
            },
            cwd=EXAMPLE,
            ready_path="/api/copilotkit/info",
        )
        self.env.update({"HOST": self.host, "PORT": str(self.port)})

    def command(self) -> list[str]:
        assert NODE is not None, "needs node on PATH"
        return [NODE, str(SERVER)]
