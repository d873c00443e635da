# Parley — `make run` serves the API on the embedded SQLite database; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run HOST=0.0.0.0 PORT=9000` serves there (the printed curl hint and dashboard address follow)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-fast lint venv migrate bench clean

# Every command here keeps Python's bytecode caches (__pycache__, git-ignored) even where the environment turns them
# off with PYTHONDONTWRITEBYTECODE (an empty value is Python's "unset"): without them every process compiles what it
# imports again, each CLI command, each pytest process and each process a test starts (pytest rewrites the asserts of
# every test module again too: collection took about 8 s of CPU per process instead of 4).
export PYTHONDONTWRITEBYTECODE =

# --no-compile: pip would byte-compile every installed module (some 10,000 files, most never imported: a payment
# SDK alone has 1,600), about 25 s; Python compiles what a process imports, once, into __pycache__
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e ".[dev]"
	@touch $(STAMP)

venv: $(STAMP)

run: venv
	@$(BIN)/parley migrate >/dev/null
	@$(BIN)/parley admin demo-key --welcome --host '$(HOST)' --port '$(PORT)' --cli '$(BIN)/parley'
	$(BIN)/parley serve --host '$(HOST)' --port '$(PORT)'


# mypy: strict on domain/ and application/, the default checks and more on adapters/ and entrypoints/
# (pyproject.toml, [tool.mypy]); its cache in .mypy_cache keeps a re-run to a few seconds
lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# `make test`: two passes. First, every test not marked serial in parallel (pytest-xdist, three processes on the two
# cores, a database of their own each), the slow end-to-end, browser, crash and fuzz tests too, files shared out
# whole (--dist loadfile) with the rest (`make test-fast` runs this pass alone, without the slow ones). Then the
# timing-sensitive multi-process and crash tests and the browser web calls, whose audio runs in real time (marked
# serial, all of them slow), in one process, with no other test process competing.
# tests/conftest.py orders the files (the slow ones first, then the most tests first), and xdist keeps that order.
# Three workers on two cores: the pass waits in real time (the carrier conversations hold a worker for about two
# minutes on some 20 s of CPU, the end-to-end tests wait on the processes they start), and with two workers the cores
# sat idle for it; a third took the pass from 12:01 to 9:04-11:34 on one machine. PostgreSQL: the pass peaks at
# about 52 of the server's 100 connections (sampled from pg_stat_activity; 82 before the operator's containers kept
# by the tests were bounded, tests/support/apps.py), the serial pass's three servers and two workers at 86.
PARALLEL ?= -n 3 --dist loadfile --no-loadscope-reorder
# `make test-fast` runs three workers too: its HTTP tests run on SQLite, whose every statement waits for the
# driver's thread, and two workers left the cores about 15 % idle (a third: about 7 % sooner, interleaved runs); it
# opens at most some 20 PostgreSQL connections.
FAST_PARALLEL ?= -n 3 --dist loadfile --no-loadscope-reorder

# The serial pass collects only the files that mark tests serial (tests/conftest.py refuses a serial mark given
# any other way).
SERIAL_FILES = $(shell grep -rlE --include='test_*.py' 'mark\.serial' tests)

# Each pass writes a JUnit report; the last line of the run adds both passes up.
REPORTS := var/test-reports

PYTEST := $(BIN)/pytest

test: lint
	@rm -rf $(REPORTS); mkdir -p $(REPORTS)
	$(PYTEST) -q $(PARALLEL) -m "not serial" --junitxml=$(REPORTS)/parallel.xml; \
	first=$$?; \
	$(PYTEST) -q -m "serial" --junitxml=$(REPORTS)/serial.xml $(SERIAL_FILES); \
	second=$$?; \
	$(BIN)/python -m tests.summary $(REPORTS)/parallel.xml $(REPORTS)/serial.xml; \
	test $$first -eq 0 -a $$second -eq 0

# the fast loop: one parallel pass that leaves out the slow tests and the serial ones (all of them slow: crash,
# multi-process and real-time audio tests), runs every property test with a fifth of its examples
# (tests/properties.py) and the HTTP-level tests on SQLite only (the PostgreSQL adapters keep their contract
# suites, and tests written for PostgreSQL alone still run); `make test` runs everything on both databases
test-fast: lint
	@rm -rf $(REPORTS); mkdir -p $(REPORTS)
	$(PYTEST) -q $(FAST_PARALLEL) -m "not slow and not serial" --hypothesis-profile=fast --http-on-sqlite-only \
	  --junitxml=$(REPORTS)/parallel.xml; \
	status=$$?; \
	$(BIN)/python -m tests.summary $(REPORTS)/parallel.xml; \
	test $$status -eq 0

migrate: venv
	$(BIN)/parley migrate

# the peers (FastAPI, pydantic, uvicorn[standard]) and uvloop are the optional `bench` group, not runtime dependencies
bench: venv
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache .hypothesis .mypy_cache
