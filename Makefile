# fwlab: the two commands a new user runs (as root, on Debian 12):
#   make demo   installs what is missing, builds, runs the 'quick' suite, prints the report path
#   make test   installs what is missing, builds, runs every test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Debian packages fwlab drives (program -> package): ip, ss -> iproute2; ping -> iputils-ping;
# nft -> nftables; iptables-* -> iptables; ipset; iperf3; ethtool; trafgen -> netsniff-ng;
# clang/llvm/libbpf-dev compile XDP programs; taskset -> util-linux; transaction tests: curl (client),
# nginx (origin server), haproxy (the proxy DUT) -- fwlab starts them in its namespaces only;
# ssh, ssh-keygen -> openssh-client (remote hosts); sshd -> openssh-server (only the remote-host test
# starts its own sshd in a test namespace; on a systemd host installing it also enables the host's ssh service);
# conntrack (flushes the DUT's connection table between connection trials);
# chromium (tests/unit/test_report_browser.py opens a rebuilt report headless: the plotly plots render).
APT_PKGS := iproute2 iputils-ping nftables iptables ipset iperf3 ethtool procps netsniff-ng \
            util-linux clang llvm libbpf-dev python3-venv curl nginx haproxy openssh-client openssh-server vsftpd \
            conntrack chromium
ENGINE_BIN := engine/target/release/fwlab-engine

.PHONY: demo test deps system-deps venv engine xdp unit netns clean-results netperf help docs

help:
	@echo "make demo   - install what is missing, build, run the quick suite, print the report path"
	@echo "make test   - install what is missing, build, run every test (unit + root netns + cargo)"
	@echo "make netperf - optional: enable Debian non-free and install netperf (changes apt sources)"
	@echo "make docs   - regenerate docs/suite-reference.md from the suite schema"

demo: deps
	$(BIN)/fwlab run quick

# tests/unit in UNIT_JOBS processes (pytest-xdist; each test has its own tmp_path), then the root
# tests one at a time (they build namespaces and measure: nothing else may load the CPUs meanwhile).
# Both always run; make fails if either did.
UNIT_JOBS ?= 2

test: deps
	@if [ -f engine/Cargo.toml ]; then cd engine && cargo test --release --quiet; fi
	@rc=0; \
	$(BIN)/python -m pytest tests/unit -q -rs -n $(UNIT_JOBS) --durations=30 || rc=$$?; \
	$(BIN)/python -m pytest tests/netns tests/remote -q -rs --durations=30 || rc=$$?; \
	exit $$rc

unit: venv
	$(BIN)/python -m pytest tests/unit -q -n $(UNIT_JOBS) --durations=30

netns: deps
	$(BIN)/python -m pytest tests/netns -q -rs --durations=30

# docs/suite-reference.md is generated from the suite schema (tests/unit/test_docs.py checks it)
docs: venv
	$(BIN)/python -m fwlab.suites.reference > docs/suite-reference.md

deps: system-deps venv engine xdp

# fwlab's XDP firewall and its loader, compiled with clang into ~/.cache/fwlab (else on first use)
xdp: venv
	@$(BIN)/python -c "from fwlab.dut.xdp_build import main; main()"
	@$(BIN)/python -m fwlab.probes.build

system-deps:
	@missing=""; for p in $(APT_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run as root, or: sudo apt-get install$$missing)"; exit 2; fi; \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

venv: $(BIN)/fwlab

$(BIN)/fwlab: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

engine:
	@if [ -f engine/Cargo.toml ]; then \
	  command -v cargo >/dev/null || { echo "cargo is missing: install Rust (rustup) to build fwlab-engine"; exit 2; }; \
	  cd engine && cargo build --release --quiet; \
	fi

# Optional, explicit: netperf is only in Debian's non-free component. This changes apt sources.
netperf:
	bash tools/enable-non-free.sh
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq netperf

clean-results:
	rm -rf results
