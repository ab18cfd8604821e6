# The two set-up commands the README promises, on a fresh machine:
#   make bench   -- install everything, run synxfer beside aws-cli (embedded S3)
#   make test    -- install everything, lint, type-check and run the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install lint test bench clean

# Two distributions, both editable: the library (synxfer and its plugins, with
# the tools that build the user guide) and, in benchmarks/, synxfer-bench (the
# harness and the test servers).
$(BIN)/.installed: pyproject.toml benchmarks/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,docs]' -e ./benchmarks
	touch $@

install: $(BIN)/.installed

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint ceph
	$(BIN)/pytest -q

# Ceph RGW, one of the S3 servers the tests run against as it ships
# (tests/test_world_servers.py; synxfer_servers.ceph): Debian's packages,
# installed here when missing and we are root (CI). Not root, or no apt-get,
# or no network: a message, and those tests skip saying why.
CEPH_PACKAGES := radosgw ceph-mon ceph-osd ceph-common
CEPH_BINARIES := ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool
.PHONY: ceph
ceph:
	@missing=""; for b in $(CEPH_BINARIES); do \
	  command -v $$b >/dev/null 2>&1 || missing="$$missing $$b"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	  echo "make ceph: missing$$missing (not root, or no apt-get): the Ceph RGW tests will skip;" \
	       "install with: sudo apt-get install $(CEPH_PACKAGES)"; exit 0; fi; \
	echo "make ceph: installing $(CEPH_PACKAGES) (apt-get, about a minute)"; \
	if apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
	   apt-get install -y -qq --no-install-recommends $(CEPH_PACKAGES) >/dev/null; then :; \
	else echo "make ceph: apt-get failed: the Ceph RGW tests will skip"; fi

# synxfer beside aws-cli (from PyPI, into bench-work/peers-venv, once) on an
# embedded moto server: the quick matrix up and down, about a minute on 2 cores.
# Without a network the peer is skipped, said so, and synxfer still runs.
bench: install
	@$(BIN)/synxfer-bench setup-peers --tools aws --if-missing \
	  || echo "make bench: could not install aws-cli (no network?): running synxfer alone"
	$(BIN)/synxfer-bench run --quick --tools synxfer,aws

# pytest-benchmark's regression check (docs/benchmarks/pytest-benchmark.md): the
# suites' `baseline` cases, synxfer's own CPU seconds (time.process_time: the
# moto server's CPU is not counted), each case's best of 7 rounds against the
# committed benchmarks/baseline/baseline.json; fails when one costs 50 % more.
# Downloads land on tmpfs when there is one. About a minute; `make test` never runs it.
BENCH_BASELINE ?= benchmarks/baseline/baseline.json
BENCH_TMP      ?= $(if $(wildcard /dev/shm/.),/dev/shm,/tmp)/synxfer-bench-compare
BENCH_ARGS     ?=
.PHONY: bench-compare
bench-compare: install
	@$(BIN)/pytest benchmarks/ -q -p no:cacheprovider --benchmark-only -k baseline \
	  --basetemp=$(BENCH_TMP) --benchmark-timer=time.process_time \
	  --benchmark-storage=file://./benchmarks/baseline \
	  --benchmark-compare=$(BENCH_BASELINE) --benchmark-compare-fail=min:50% \
	  --benchmark-columns=min,median,max,rounds --benchmark-sort=name $(BENCH_ARGS); \
	  status=$$?; rm -rf $(BENCH_TMP); exit $$status

clean:
	rm -rf $(VENV) bench-work .pytest_cache .mypy_cache .ruff_cache
