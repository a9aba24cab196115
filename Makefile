# Two entry points for a fresh machine: `make plan` (set up, then plan the dev stack offline)
# and `make test`. Everything installs into .venv from requirements.lock.
VENV ?= .venv
PY := $(VENV)/bin/python
CHECKOV_VENV ?= .venv-checkov
# promtool and amtool for the tests (FACTS.md section 8): Debian packages pinned with their sums
# in tools.lock, fetched and unpacked into $(TOOLS) by scripts/debian_tools.py.
TOOLS ?= .tools
PROMTOOL := $(TOOLS)/promtool/usr/bin/promtool
AMTOOL := $(TOOLS)/prometheus-alertmanager/usr/bin/amtool
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

$(TOOLS)/.installed: tools.lock scripts/debian_tools.py
	python3 scripts/debian_tools.py --lock tools.lock --into $(TOOLS)
	$(PROMTOOL) --version >/dev/null && $(AMTOOL) --version >/dev/null
	touch $@

plan: $(VENV)/.installed
	$(VENV)/bin/rtip plan $(STACK)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

test: lint $(CHECKOV_VENV)/.installed $(TOOLS)/.installed
	RTIP_CHECKOV=$(CHECKOV_VENV)/bin/checkov RTIP_PROMTOOL=$(PROMTOOL) RTIP_AMTOOL=$(AMTOOL) $(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) benchmarks/plan_speed.py

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(TOOLS) .pytest_cache .ruff_cache .hypothesis
