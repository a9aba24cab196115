# Two entry points for a fresh machine: `make plan` (set up, then plan the dev stack offline)
# and `make test`. Everything installs into .venv from requirements.lock.
VENV ?= .venv
PY := $(VENV)/bin/python
CHECKOV_VENV ?= .venv-checkov
STACK ?= dev

.PHONY: plan test lint bench clean

$(VENV)/.installed: requirements.lock pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

$(CHECKOV_VENV)/.installed: requirements-checkov.lock
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.lock
	touch $@

plan: $(VENV)/.installed
	$(VENV)/bin/rtip plan $(STACK)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

test: lint $(CHECKOV_VENV)/.installed
	RTIP_CHECKOV=$(CHECKOV_VENV)/bin/checkov $(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) benchmarks/plan_speed.py

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .pytest_cache .ruff_cache .hypothesis
