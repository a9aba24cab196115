# Two entry points for a fresh machine: `make plan` (set up, then plan the dev stack offline)
# and `make test`. Everything installs into .venv from requirements.lock.
VENV ?= .venv
PY := $(VENV)/bin/python
CHECKOV_VENV ?= .venv-checkov
# promtool and amtool for the tests (FACTS.md section 8): Debian's prometheus and
# prometheus-alertmanager packages, unpacked here, never installed system-wide. The one pin of each.
PROMETHEUS_DEB := 2.42.0+ds-5+deb12u1
ALERTMANAGER_DEB := 0.25.0-1+b4
TOOLS ?= .tools
PROMTOOL := $(TOOLS)/prometheus-$(PROMETHEUS_DEB)/usr/bin/promtool
AMTOOL := $(TOOLS)/prometheus-alertmanager-$(ALERTMANAGER_DEB)/usr/bin/amtool
# $(call unpack,package,version): download one Debian package and unpack it under $(TOOLS).
unpack = mkdir -p $(TOOLS)/deb && cd $(TOOLS)/deb && (apt-get download -q $(1)=$(2) \
	|| (apt-get update -qq && apt-get download -q $(1)=$(2))) && cd - >/dev/null \
	&& dpkg-deb -x $(TOOLS)/deb/$(1)_$(subst :,%3a,$(2))_*.deb $(TOOLS)/$(1)-$(2)
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
	$(call unpack,prometheus,$(PROMETHEUS_DEB))
	$(PROMTOOL) --version >/dev/null

$(AMTOOL):
	$(call unpack,prometheus-alertmanager,$(ALERTMANAGER_DEB))
	$(AMTOOL) --version >/dev/null

plan: $(VENV)/.installed
	$(VENV)/bin/rtip plan $(STACK)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

test: lint $(CHECKOV_VENV)/.installed $(PROMTOOL) $(AMTOOL)
	RTIP_CHECKOV=$(CHECKOV_VENV)/bin/checkov RTIP_PROMTOOL=$(PROMTOOL) RTIP_AMTOOL=$(AMTOOL) $(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) benchmarks/plan_speed.py

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(TOOLS) .pytest_cache .ruff_cache .hypothesis
