# Two commands: `make run` (Azurite + the local Functions host on :8130) and
# `make test` (the same set-up, then the test suite against its own Azurite).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup run test bench package clean

setup: $(VENV)/.installed node_modules/.installed local.settings.json

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-worker.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --ignore-requires-python \
	    --upgrade --target $(VENV)/functions-worker -r requirements-worker.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

local.settings.json:
	cp local.settings.sample.json local.settings.json

run: setup
	@echo "Mint a token:  $(PY) -m devhost token --tenant tenant-a --scope factory.health.read"
	@echo "Then call:     curl -H \"Authorization: Bearer <token>\" http://127.0.0.1:8130/runtime-cloud/health"
	$(PY) -m devhost up --port 8130

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	@for bench in bench/[a-z]*.py; do echo "== $$bench"; $(PY) $$bench || exit 1; done

# The zip a Flex Consumption deployment uploads: the app root as .funcignore
# leaves it (see tools/package.py); Azure's remote build installs requirements.txt.
PACKAGE ?= dist/runtime-cloud-host.zip
package: $(VENV)/.installed
	$(PY) tools/package.py --output $(PACKAGE)

clean:
	rm -rf $(VENV) node_modules .data dist
