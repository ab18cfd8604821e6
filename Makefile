# The two set-up commands the README promises, on a fresh machine:
#   make bench   -- install everything, run synxfer-bench --quick (embedded S3)
#   make test    -- install everything, lint, type-check and run the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install lint test bench clean

# Two distributions, both editable: the library (synxfer and its plugins) and,
# in benchmarks/, synxfer-bench (the harness and the test servers).
$(BIN)/.installed: pyproject.toml benchmarks/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' -e ./benchmarks
	touch $@

install: $(BIN)/.installed

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

bench: install
	$(BIN)/synxfer-bench --quick

clean:
	rm -rf $(VENV) bench-work .pytest_cache .mypy_cache .ruff_cache
