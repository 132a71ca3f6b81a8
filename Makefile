# Two commands: `make run` (Azurite + the local Functions host on :8130) and
# `make test` (the same set-up, then the test suite against Azurites of its own).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup bytecode run test test-domain test-storm chaos check format bench docs package deploy runner-image clean

setup: $(VENV)/.installed $(VENV)/bin/runtime-cloud node_modules/.installed local.settings.json

# .venv/codegen: the client generator of tests/test_generated_client.py (requirements-codegen.txt says why there).
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-infra.txt requirements-worker.txt requirements-codegen.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --ignore-requires-python \
	    --upgrade --target $(VENV)/functions-worker -r requirements-worker.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --upgrade --target $(VENV)/codegen -r requirements-codegen.txt
	touch $@

# The operator CLI (runtime_cloud_cli/) as the console script `runtime-cloud`: this project installed
# (pyproject.toml; build backend flit-core, from requirements-dev.txt), which puts the CLI's package alone
# into the venv (an editable install would put the whole checkout on every interpreter's path); again
# whenever its sources change. Its dependencies are requirements-dev.txt's.
CLI_SOURCES := $(wildcard runtime_cloud_cli/*.py runtime_cloud_cli/*/*.py)
$(VENV)/bin/runtime-cloud: pyproject.toml $(CLI_SOURCES) $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall .
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

# The whole suite, in TEST_WORKERS pytest-xdist workers: each worker is a pytest session with an Azurite
# and hosts of its own (tests/conftest.py), on free ports in its own temporary folder. Most tests wait
# on hosts, timers and Azurite rather than on a CPU, hence more workers than cores. `--dist loadscope`:
# a module's tests run on one worker, so a host or an Azurite of the module's own starts once; the
# workers take modules in the order tests/conftest.py gives them (the longest first), not by test count.
# Five on two cores: with four, the cores were idle a sixth of the first five minutes, while the long
# modules that wait on hosts (outages, hub moves, crash recovery) held most workers (docs/development.md,
# Test time). TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 5
PARALLEL = -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder
test: setup bytecode
	$(KEEP_BYTECODE) $(PY) -m pytest $(PARALLEL) $(PYTEST_ARGS)

# The project's byte code, compiled once before the suite: the suite starts about a hundred host processes,
# their job scalers and the CLI, each importing the project anew. Python compiles a module whose byte code
# it does not find, and where PYTHONDONTWRITEBYTECODE is set (on the machines here it is) it never keeps
# what it compiled, so every process compiled every module again (about 0.25 s of CPU per fresh host).
# compileall writes it whatever that variable says, and Python reads it either way; __pycache__/ is ignored
# by git and by the package (.funcignore). Quick when nothing changed.
BYTECODE_DIRS := function_app.py functions orchestrations shared devhost runner_job runtime_cloud_cli storage_protocol tools tests bench
bytecode: $(VENV)/.installed
	$(PY) -m compileall -q -j 0 $(BYTECODE_DIRS)

# The suite's processes keep the byte code they compile, above all pytest's: every worker rewrites the
# asserts of each test module and of every module of its plugins' packages (schemathesis, hypothesis, anyio:
# about 500 modules) and, where PYTHONDONTWRITEBYTECODE is set, did it again in every worker of every run
# (12.5 s of CPU each, 4.2 s when read back). pytest writes its rewritten modules atomically beside the byte
# code (`*-pytest-<version>.pyc`), so workers racing to write one are safe, and reads them back whatever
# that variable says. An empty value is unset to Python.
KEEP_BYTECODE := PYTHONDONTWRITEBYTECODE=

# The domain tier alone: the tests that need neither Azurite nor a host process (the `domain` mark,
# which tests/conftest.py gives every such test), in under a minute. `make test` runs them too.
test-domain: setup bytecode
	$(KEEP_BYTECODE) $(PY) -m pytest -m domain $(PARALLEL) $(PYTEST_ARGS)

# The full-size capacity storm (pytest.ini deselects it from `make test`, which runs a smaller one).
test-storm: setup
	$(KEEP_BYTECODE) $(PY) -m pytest -m storm tests/capacity/test_storm.py $(PYTEST_ARGS)

# The chaos run (docs/development.md, Chaos run): two local hosts on one Azurite under load and faults, then the
# invariants; not part of `make test`. CHAOS_ARGS='--minutes 4 --seed 1234' replays a run.
CHAOS_ARGS ?=
chaos: setup
	$(PY) -m tools.chaos $(CHAOS_ARGS)

# The checks CI runs before the tests (docs/development.md): lint, types, import layers.
check: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo --no-cache

# Rewrites files: import order, then the formatter (settings in pyproject.toml).
format: $(VENV)/.installed
	$(VENV)/bin/ruff check --select I --fix .
	$(VENV)/bin/ruff format .

bench: setup
	@for bench in bench/[a-z]*.py; do echo "== $$bench"; $(PY) $$bench || exit 1; done

# The documentation site (docs/, mkdocs.yml) into site/, not committed: --strict makes a broken link or
# anchor an error. tests/docs/ runs every shell example of README.md and docs/ against a local host.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The zip a Flex Consumption deployment uploads: the app root as .funcignore
# leaves it (see tools/package.py); Azure's remote build installs requirements.txt.
PACKAGE ?= dist/runtime-cloud-host.zip
package: $(VENV)/.installed
	$(PY) tools/package.py --output $(PACKAGE)

# Deploy to Azure (docs/azure.md, Deploying): `pulumi up` of infra/ for the stack STACK
# (infra/Pulumi.$(STACK).yaml), then the package above uploaded to the app it made.
# Needs the Pulumi CLI, the Azure CLI and an Azure login, which machines without
# internet access do not have: it says which one is missing and stops.
STACK ?= dev
PULUMI_ARGS ?=
deploy: $(VENV)/.installed
	@command -v pulumi >/dev/null 2>&1 || { echo "make deploy: the Pulumi CLI is not installed (https://www.pulumi.com/docs/iac/download-install/); see docs/azure.md, Deploying" >&2; exit 2; }
	@command -v az >/dev/null 2>&1 || { echo "make deploy: the Azure CLI (az) is not installed; it uploads the package (docs/azure.md, Deploying)" >&2; exit 2; }
	@az account show >/dev/null 2>&1 || { echo "make deploy: not logged in to Azure: az login, then az account set --subscription <id>" >&2; exit 2; }
	@test -f infra/Pulumi.$(STACK).yaml || { echo "make deploy: no infra/Pulumi.$(STACK).yaml; copy infra/Pulumi.dev.yaml and change its names (docs/azure.md, Deploying)" >&2; exit 2; }
	$(MAKE) --no-print-directory package
	cd infra && pulumi up --stack $(STACK) $(PULUMI_ARGS)
	az functionapp deployment source config-zip --build-remote true --src $(PACKAGE) \
	    --resource-group "$$(cd infra && pulumi stack output hostResourceGroupName --stack $(STACK))" \
	    --name "$$(cd infra && pulumi stack output functionAppName --stack $(STACK))"

# The runner job's image (runner_job/Dockerfile, docs/provisioning.md: Where the runners run): built with Docker, then
# its size printed (the build's own `du -sh` step lists what each part weighs).
RUNNER_IMAGE ?= runtime-cloud-runner-job:local
runner-image:
	@command -v docker >/dev/null 2>&1 || { echo "make runner-image: Docker is not installed" >&2; exit 2; }
	docker build --progress=plain -f runner_job/Dockerfile -t $(RUNNER_IMAGE) .
	docker image ls $(RUNNER_IMAGE) --format 'runner image {{.Repository}}:{{.Tag}}: {{.Size}}'

clean:
	rm -rf $(VENV) node_modules .data dist
