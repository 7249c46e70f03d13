# PauseMesh for Python. Two commands matter: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test-tools test-builds test-checks test-run demo demo-webhooks serve test check lint typecheck unit bench clean browser frontend copilotkit copilotkit-build examples-build mcp-conformance

# The pinned set goes in with uv (itself pinned): the same packages as pip installs from the
# lockfile, in a few seconds instead of twenty-odd from a warm cache. The venv keeps its pip.
# Compiled to bytecode at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (it is on
# some CI machines) nothing would cache it, and every interpreter the tests start would compile
# Litestar, pydantic and the SDKs again (a pytest worker's collection: 22 CPU-s instead of 9).
UV_VERSION := 0.13.10
UV_INSTALL = $(BIN)/uv pip install --quiet --compile-bytecode

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	@test -x $(BIN)/uv || $(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(UV_INSTALL) --python $(BIN)/python -r requirements.lock
	$(UV_INSTALL) --python $(BIN)/python --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)  ## create .venv with every pinned dependency (idempotent): all `make demo` needs

test-tools: install  ## what only the tests need (built by `make test`, never by `make demo`)
	@# The official @ag-ui/client for the Node conformance test (pinned by its lockfile).
	@test -d tests/protocols/node/node_modules || ! command -v npm >/dev/null \
		|| (cd tests/protocols/node && npm ci --no-audit --no-fund --silent)
	@# The official mcp 1.30 client, the last SDK line speaking 2025-11-25 Tasks, kept apart
	@# (the app pins mcp 2.3.0) for tests/protocols/test_mcp_tasks.py.
	@# Under the lock the tests take when they find it missing (tests/support/mcp_tasks_client.py).
	@flock .venv-mcp-tasks.lock bash -c 'test -f .venv-mcp-tasks/.installed || { \
		($(PYTHON) -m venv .venv-mcp-tasks || python3 -m venv .venv-mcp-tasks) \
		&& $(UV_INSTALL) --python .venv-mcp-tasks/bin/python \
			-r tests/protocols/mcp_tasks_client/requirements.txt \
		&& touch .venv-mcp-tasks/.installed; }'

demo: install  ## run the demo on SQLite (./data/), http://127.0.0.1:$${PAUSEMESH_PORT:-8787}
	$(BIN)/pausemesh demo

demo-webhooks: install  ## the demo, its approvals sent to examples/approval_webhooks.py (chat messages with decision links on stdout)
	$(BIN)/python examples/approval_webhooks.py --with-demo

serve: install
	$(BIN)/pausemesh serve

lint: install  ## ruff, the formatter and the import layers (lint-imports)
	$(BIN)/ruff check backend tests bench examples
	$(BIN)/ruff format --check backend tests bench examples
	@# The layers of docs/adr/0004-layering.md ([tool.importlinter] in pyproject.toml).
	$(BIN)/lint-imports --no-logo

typecheck: install
	$(BIN)/mypy
	$(BIN)/mypy examples
	@# The benches and the tests (with their helpers); the MCP tasks client runs in its own
	@# venv against another release of the mcp package, which this venv cannot type.
	$(BIN)/mypy --explicit-package-bases bench tests --exclude tests/protocols/mcp_tasks_client

browser:  ## Debian's Chromium for the browser tests (never a downloaded browser build)
	@test -x /usr/bin/chromium || { apt-get update && apt-get install -y chromium; }

COPILOTKIT := examples/copilotkit
COPILOTKIT_SOURCES := $(wildcard $(COPILOTKIT)/src/*.ts $(COPILOTKIT)/test/*.ts $(COPILOTKIT)/web/*) \
	$(COPILOTKIT)/vite.config.ts $(COPILOTKIT)/tsconfig.json $(COPILOTKIT)/tsconfig.web.json

$(COPILOTKIT)/node_modules/.installed: $(COPILOTKIT)/package-lock.json
	cd $(COPILOTKIT) && npm ci --no-audit --no-fund --silent
	@touch $@

$(COPILOTKIT)/dist/.built: $(COPILOTKIT)/node_modules/.installed $(COPILOTKIT_SOURCES)
	cd $(COPILOTKIT) && npm run build --silent
	@touch $@

copilotkit-build: $(COPILOTKIT)/dist/.built  ## build the CopilotKit example (runtime, durable runner, page)

copilotkit: install copilotkit-build  ## CopilotKit on PauseMesh: the demo, and the chat at http://127.0.0.1:4000
	@$(BIN)/pausemesh demo --no-browser & demo=$$!; trap 'kill $$demo' EXIT; \
		cd $(COPILOTKIT) && COPILOTKIT_TELEMETRY_DISABLED=$${COPILOTKIT_TELEMETRY_DISABLED:-true} \
		PAUSEMESH_URL=http://127.0.0.1:$${PAUSEMESH_PORT:-8787} node dist/src/server.js

frontend:  ## rebuild the browser demo into backend/pausemesh/demo/static (Node; `make demo` needs none)
	cd frontend-demo && npm ci --no-audit --no-fund && npm test && npm run build

examples-build:  ## the CopilotKit example, built for its end-to-end tests (needs npm; `make demo` does not)
	@! command -v npm >/dev/null || $(MAKE) --no-print-directory copilotkit-build

# The official MCP conformance suite and the Node 22 it needs, pinned from npm beside it (the
# machine's Node is left alone); for tests/protocols/test_mcp_conformance.py, never `make demo`.
MCP_CONFORMANCE := tests/protocols/mcp_conformance

$(MCP_CONFORMANCE)/node_modules/.installed: $(MCP_CONFORMANCE)/package-lock.json
	cd $(MCP_CONFORMANCE) && npm ci --no-audit --no-fund --silent
	@touch $@

mcp-conformance:  ## the MCP conformance suite for the tests (needs npm; `make demo` does not)
	@! command -v npm >/dev/null || $(MAKE) --no-print-directory $(MCP_CONFORMANCE)/node_modules/.installed

# Test processes: most tests wait on server processes (forked from a fork server per worker,
# tests/support/forkserver.py, so a start costs little CPU), so twice the cores pays.
TEST_WORKERS ?= 4

# What `make test` runs beside the tests, all at once: the tools and builds a few tests need
# (npm installs and builds wait on the network and the disk) and lint and types. The tests start
# at the same time; the few that need a build wait for BUILDS_STATUS, which holds the builds'
# exit status once they end (tests/support/builds.py).
TEST_BUILDS := test-tools browser examples-build mcp-conformance
BUILDS_STATUS := .test-builds.status

test-builds: install
	@$(MAKE) --no-print-directory --output-sync=target $(TEST_BUILDS) \
		|| { status=$$?; echo $$status > $(BUILDS_STATUS); exit $$status; }
	@echo 0 > $(BUILDS_STATUS)

test-checks: install
	@$(MAKE) --no-print-directory --output-sync=target lint typecheck

# In parallel, one file per worker (module fixtures stay together), the longest files first
# (tests/conftest.py orders them) so no worker is left with a long one at the end.
# PYTHONDONTWRITEBYTECODE emptied (Python reads an empty value as unset): the suite starts
# hundreds of interpreters on the same test and package modules, which compile once, not in each.
test-run: install
	PAUSEMESH_TEST_BUILDS=$(CURDIR)/$(BUILDS_STATUS) PYTHONDONTWRITEBYTECODE= \
		$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

test: install  ## every test: lint, types, unit, contract, e2e
	@rm -f $(BUILDS_STATUS)
	@# One job server for all: the three at once, and the builds and checks side by side.
	@$(MAKE) --no-print-directory -j 12 test-builds test-checks test-run

check: install lint typecheck  ## the inner loop: lint, types, unit and contract tests (no servers started)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_WORKERS) tests/unit tests/contract -q

unit: install
	$(BIN)/pytest tests/unit tests/contract

bench: install
	$(BIN)/python bench/core.py
	$(BIN)/python bench/http.py
	$(BIN)/python bench/agui.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
