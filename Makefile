# Two entry points: `make demo` (the main job on the embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install clean

$(STAMP): setup.py Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m spacy_mlm demo

# torch's kernels held to AVX2, as on a CPU without AVX-512 (AMD Zen 2/3, older Intel)
AVX2_ONLY := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2

# tests in 2 processes (pytest-xdist), one per core of the 2-core machine the suite is sized for;
# `make test PYTEST_WORKERS=` runs them in one. Tests share nothing but read-only fixtures: each
# worker makes its own tiny models, temporary directories and torchrun ports.
PYTEST_WORKERS ?= -n 2 --dist worksteal

# the layering contract (.importlinter) first: a back import fails the build before the tests run;
# then every test, then the numerically sensitive ones again on AVX2 kernels (tests/numerics.py), so a
# test that holds only with this CPU's rounding fails here too
test: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) tests
	$(AVX2_ONLY) $(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) -m numerics tests

clean:
	rm -rf $(VENV) build *.egg-info
