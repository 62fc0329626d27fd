# The two commands of the README are `make demo` and `make test`; each installs what it needs.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow lint bench setup setup-tests stack-up stack-down

setup:
	@scripts/bootstrap.sh

setup-tests:
	@scripts/bootstrap.sh --tests

demo: setup
	$(BIN)/gridstream demo

lint: setup
	$(BIN)/ruff check gridstream tests benchmarks examples
	$(BIN)/mypy

test: setup-tests lint
	$(BIN)/python -m pytest -m "not slow" --durations=25 $(PYTEST_ARGS)

test-slow: setup-tests
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

bench: setup
	$(BIN)/python benchmarks/run_all.py

stack-up: setup
	$(BIN)/gridstream stack up

stack-down: setup
	$(BIN)/gridstream stack down
