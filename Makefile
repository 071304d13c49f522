# PowerOn Unified: `make run` and `make test` are the whole set-up (see README.md).
#   make run     the production build: UI and API together on http://localhost:$(PORT) (API under /api)
#   make dev     hot reload: UI on :$(UI_PORT), API on :$(API_PORT)
#   make worker  a process that only executes runs from the shared queue (PostgreSQL)
#   make test, make bench, make lint, make clean
SHELL := /bin/bash
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
UI_PORT ?= 3000
API_PORT ?= 8000
# make run serves UI and API on one port: PORT, or UI_PORT when only that is given (the make dev habit
# `make run UI_PORT=3100 API_PORT=8100` then serves everything on 3100; API_PORT is for make dev only).
PORT ?= $(UI_PORT)

export REFLEX_USE_NPM := 1
export REFLEX_TELEMETRY_ENABLED := false
export PYTHONDONTWRITEBYTECODE := 1

# The URLs the app builds and prints (SSO and OAuth redirects, webhook addresses, mails) and the
# one the browser's websocket uses: one port for make run, two for make dev; the environment wins.
run: export REFLEX_API_URL ?= http://localhost:$(PORT)
run: export POWERON_API_URL ?= http://localhost:$(PORT)
run: export POWERON_UI_URL ?= http://localhost:$(PORT)
dev: export REFLEX_API_URL ?= http://localhost:$(API_PORT)
dev: export POWERON_API_URL ?= http://localhost:$(API_PORT)
dev: export POWERON_UI_URL ?= http://localhost:$(UI_PORT)

.PHONY: run dev worker test bench setup setup-test system-deps lint clean

$(STAMPS)/venv: requirements.txt
	@mkdir -p $(STAMPS)
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $@

$(STAMPS)/venv-dev: $(STAMPS)/venv requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $@

$(STAMPS)/node: scripts/ensure_node.sh
	@mkdir -p $(STAMPS)
	scripts/ensure_node.sh > $@.path
	@touch $@

# Installs the Reflex frontend (npm) once; later runs find it in .web/.
$(STAMPS)/frontend: $(STAMPS)/venv $(STAMPS)/node rxconfig.py
	PATH="$$(cat $(STAMPS)/node.path):$$PATH" $(VENV)/bin/reflex init --loglevel warning >/dev/null
	@touch $@

# System packages the product needs (bubblewrap for script.python): checked on every set-up,
# installed with apt when root, else one line says how; the set-up goes on either way.
system-deps:
	@scripts/ensure_run_deps.sh

setup: system-deps $(STAMPS)/venv $(STAMPS)/node $(STAMPS)/frontend
	$(PY) -m backend.bootstrap

setup-test: system-deps $(STAMPS)/venv-dev $(STAMPS)/node $(STAMPS)/frontend
	scripts/ensure_test_deps.sh

# make run: Reflex's production mode. Every start compiles the app and builds the frontend bundle
# (Vite, some 10 s), so what it serves is always the sources as they are; it serves the bundle and
# the backend on one port and never reloads under you. GRANIAN_WORKERS backend worker processes
# (Reflex's default: 1, with REFLEX_REDIS_URL 2 x CPUs + 1, at most 8; rxconfig.py keeps 1 unless
# PostgreSQL and Redis are configured). make dev: the Vite dev server and hot reload on code
# changes, the SQLite folder and the tests kept out of the watch.
run: setup
	@mkdir -p data
	@echo "PowerOn: building the production frontend, then serving UI and API on http://localhost:$(PORT)" \
	  "(API http://localhost:$(PORT)/api/health, docs /api/docs)"
	@if [ "$(origin API_PORT)" = "command line" ]; then echo "PowerOn: API_PORT is for make dev; make run serves the API on port $(PORT) too, under /api"; fi
	PATH="$$(cat $(STAMPS)/node.path):$$PATH" exec scripts/supervise.sh \
	  $(VENV)/bin/reflex run --env prod --frontend-port $(PORT) --backend-port $(PORT) --loglevel warning

dev: setup
	@mkdir -p data
	@echo "PowerOn (dev, hot reload): UI http://localhost:$(UI_PORT)  API http://localhost:$(API_PORT)/api/health"
	REFLEX_HOT_RELOAD_EXCLUDE_PATHS=$(CURDIR)/data:$(CURDIR)/tests \
	PATH="$$(cat $(STAMPS)/node.path):$$PATH" exec scripts/supervise.sh \
	  $(VENV)/bin/reflex run --frontend-port $(UI_PORT) --backend-port $(API_PORT) --loglevel info

# A run-queue worker (backend/worker.py): executes runs, serves no HTTP; needs POWERON_DB_URL on PostgreSQL.
worker: setup
	@# POWERON_ROLE defaults to worker in the process itself (backend/worker.py), not for the set-up before it
	exec $(PY) -m backend.worker

test: setup-test
	PATH="$$(cat $(STAMPS)/node.path):$$PATH" scripts/run_tests.sh $(PYTEST_ARGS)

lint: $(STAMPS)/venv-dev
	$(VENV)/bin/ruff check backend state components poweron_app tests

bench: setup $(STAMPS)/venv-dev
	@for script in bench/*.py; do [ -e "$$script" ] || continue; echo "== $$script"; $(PY) "$$script"; done

clean:
	rm -rf $(STAMPS) .web .states
