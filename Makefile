# The two commands a newcomer needs: `make run` and `make test`. See README.md.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
PORT ?= 8000
KUBE_PORT ?= 6443
# loadgroup keeps each xdist_group on one worker: the real Ray heads ("real-ray") start one
# at a time instead of two at once on two cores.
PYTEST_ARGS ?= -n 2 --dist loadgroup

.PHONY: run test lint typecheck checks pytest bench reliability install install-dev clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The last step installs the `gangway` command line (gangway_cli/) into the environment.
$(STAMP_RUN): requirements.txt pyproject.toml | $(PY)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(STAMP_DEV): requirements.txt requirements-dev.txt requirements-codegen.txt pyproject.toml | $(PY)
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -r requirements-codegen.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@ $(STAMP_RUN)

install: $(STAMP_RUN)
install-dev: $(STAMP_DEV)

## run: the embedded default on a fresh machine (SQLite, no servers needed), demo data included
run: $(STAMP_RUN)
	$(PY) scripts/run.py --port $(PORT) --kube-port $(KUBE_PORT)

## test: lint, types, Django checks and the whole suite against real PostgreSQL and Redis
test: $(STAMP_DEV)
	@eval "$$($(PY) scripts/test_services.py)" && \
	  $(MAKE) --no-print-directory checks && \
	  $(BIN)/pytest $(PYTEST_ARGS)

# Django's own checks run against a throwaway SQLite database: they read models, not data.
checks: export DATABASE_URL = sqlite:///:memory:
checks: lint typecheck
	DEBUG=1 $(PY) manage.py check --fail-level WARNING
	DEBUG=1 $(PY) manage.py makemigrations --check --dry-run
	# check --deploy also checks the collected static files, so collect them first (into a
	# throwaway directory), as the image build does.
	export DEBUG=0 SECRET_KEY=check-deploy-secret-key-that-is-long-and-random-0123456789abcdefgh \
	  ALLOWED_HOSTS=gangway.example.com CACHE_URL=redis://redis.example.internal:6379/1 \
	  GANGWAY_VAR_DIR=$$(mktemp -d) && \
	  $(PY) manage.py collectstatic --noinput -v0 && \
	  $(PY) manage.py check --deploy --fail-level WARNING; \
	  status=$$?; rm -rf "$$GANGWAY_VAR_DIR"; exit $$status
	DEBUG=1 $(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck:
	$(BIN)/mypy

## bench: the benchmarks; figures go to docs/benchmarks.md
bench: $(STAMP_DEV)
	@eval "$$($(PY) scripts/test_services.py)" && $(PY) -m benchmarks

## reliability: fault, load and abuse suites against the real stack; figures go to docs/reliability.md
reliability: $(STAMP_DEV)
	@eval "$$($(PY) scripts/test_services.py)" && $(PY) -m reliability

clean:
	rm -rf var .mypy_cache .ruff_cache .pytest_cache
