# PowerOn Unified: `make run` and `make test` are the whole set-up (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
UI_PORT ?= 3000
API_PORT ?= 8000

export REFLEX_USE_NPM := 1
export REFLEX_TELEMETRY_ENABLED := false
export REFLEX_API_URL ?= http://localhost:$(API_PORT)
export POWERON_API_URL ?= http://localhost:$(API_PORT)
export POWERON_UI_URL ?= http://localhost:$(UI_PORT)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run dev test bench setup setup-test system-deps lint clean

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

# make run watches no source folder (an empty one), so the backend never restarts under you;
# make dev reloads on code changes. Both keep the SQLite folder out of the watch: its -wal
# and -shm files change on every write.
run: setup
	@mkdir -p $(STAMPS)/no-reload data
	@echo "PowerOn: UI http://localhost:$(UI_PORT)  API http://localhost:$(API_PORT)/api/health"
	REFLEX_HOT_RELOAD_OVERRIDE_PATHS=$(CURDIR)/$(STAMPS)/no-reload \
	PATH="$$(cat $(STAMPS)/node.path):$$PATH" exec scripts/supervise.sh \
	  $(VENV)/bin/reflex run --frontend-port $(UI_PORT) --backend-port $(API_PORT) --loglevel warning

dev: setup
	@mkdir -p data
	REFLEX_HOT_RELOAD_EXCLUDE_PATHS=$(CURDIR)/data:$(CURDIR)/tests \
	PATH="$$(cat $(STAMPS)/node.path):$$PATH" exec scripts/supervise.sh \
	  $(VENV)/bin/reflex run --frontend-port $(UI_PORT) --backend-port $(API_PORT) --loglevel info

test: setup-test
	PATH="$$(cat $(STAMPS)/node.path):$$PATH" scripts/run_tests.sh $(PYTEST_ARGS)

lint: $(STAMPS)/venv-dev
	$(VENV)/bin/ruff check backend state components poweron_app tests

bench: setup $(STAMPS)/venv-dev
	@for script in bench/*.py; do [ -e "$$script" ] || continue; echo "== $$script"; $(PY) "$$script"; done

clean:
	rm -rf $(STAMPS) .web .states
