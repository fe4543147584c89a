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

# the layering contract (.importlinter) first: a back import fails the build before the tests run
test: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q -p no:cacheprovider tests

clean:
	rm -rf $(VENV) build *.egg-info
