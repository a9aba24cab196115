# Two entry points for a fresh machine: `make plan` (set up, then plan the dev stack offline)
# and `make test`. Everything installs into .venv from requirements.lock.
VENV ?= .venv
PY := $(VENV)/bin/python
CHECKOV_VENV ?= .venv-checkov
# promtool for the tests (FACTS.md section 8): Debian's prometheus package, unpacked here, never
# installed system-wide. The one pin of its version.
PROMETHEUS_DEB := 2.42.0+ds-5+deb12u1
TOOLS ?= .tools
PROMTOOL := $(TOOLS)/prometheus-$(PROMETHEUS_DEB)/usr/bin/promtool
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

$(PROMTOOL):
	mkdir -p $(TOOLS)/deb
	cd $(TOOLS)/deb && (apt-get download -q prometheus=$(PROMETHEUS_DEB) \
		|| (apt-get update -qq && apt-get download -q prometheus=$(PROMETHEUS_DEB)))
	dpkg-deb -x $(TOOLS)/deb/prometheus_$(subst :,%3a,$(PROMETHEUS_DEB))_*.deb $(TOOLS)/prometheus-$(PROMETHEUS_DEB)
	$(PROMTOOL) --version >/dev/null

plan: $(VENV)/.installed
	$(VENV)/bin/rtip plan $(STACK)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

test: lint $(CHECKOV_VENV)/.installed $(PROMTOOL)
	RTIP_CHECKOV=$(CHECKOV_VENV)/bin/checkov RTIP_PROMTOOL=$(PROMTOOL) $(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) benchmarks/plan_speed.py

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(TOOLS) .pytest_cache .ruff_cache .hypothesis
