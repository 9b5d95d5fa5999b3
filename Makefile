# ringcap: one Makefile for set-up, build, demo, tests and benchmarks.
# Every target installs what it needs on a fresh Debian machine (run as root).

SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
# Builds reuse a target dir outside the clone so CI and clean clones stay fast.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/ringcap-target
BIN := $(CARGO_TARGET_DIR)/release/ringcap
PREFIX ?= /usr/local
# curl and prometheus (for promtool) scrape and check the --metrics page as a Prometheus server would;
# openssl makes the CA and certificates the `ringcap serve` and record TLS tests use (curl --cert, rustls);
# systemd brings systemd-analyze, which checks the shipped unit (tests/config.rs).
# Java 17 and Maven run the Apache Kafka broker of tests/kafka.rs (jars fetched by scripts/kafka-jars.sh) and
# s3proxy, the S3 API server of tests/archive/ (scripts/s3proxy-jar.sh); curl (--aws-sigv4) reads the archive back.
# rclone is the upload peer `ringcap archive` is measured against (make bench-fleet, issue 35).
# wireshark-common (also pulled in by tshark) brings text2pcap, editcap and mergecap, which write the other
# tools' files of tests/differential.
# python3-scapy (for Debian's /usr/bin/python3) encodes the tunnelled traffic of tests/tunnels.rs
# (scripts/tunnels.py): this kernel has no GENEVE/GRE/ERSPAN/IP-in-IP devices to make it.
# chromium: the browser test of serve's page (tests/web.rs, driven by Playwright from requirements-test.txt;
# Playwright is given /usr/bin/chromium and never downloads a browser of its own).
# dnsmasq-base is the real DNS resolver of tests/names.rs (names per flow, issue 36); -base is the binary
# alone, without the dnsmasq package's system service that would take port 53 on a CI machine.
APT_PKGS := gcc clang libbpf-dev libpcap-dev tcpdump tshark wireshark-common netsniff-ng tcpreplay iproute2 zstd lz4 gzip procps util-linux e2fsprogs coreutils ethtool time librsvg2-bin libcap2-bin curl prometheus openssl systemd openjdk-17-jre-headless maven rclone python3-scapy chromium dnsmasq-base
DEBIAN_FRONTEND := noninteractive
export DEBIAN_FRONTEND

.PHONY: all deps build install install-files demo test test-differential bench bench-capture bench-gen bench-disk bench-trace bench-records bench-query bench-everything bench-tunnel bench-fleet bench-before-after bench-xdp bench-xdp-filter soak fmt clippy clean

all: build

# Install only what is missing, so repeated runs cost nothing.
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@if [ -f requirements-test.txt ]; then \
	  python3 -m pip --version >/dev/null 2>&1 || apt-get install -y -qq python3-pip >/dev/null; \
	  python3 -m pip install -q -r requirements-test.txt; \
	  echo "python test packages: $$(python3 -m pip freeze 2>/dev/null | grep -i -E "^($$(cut -d= -f1 requirements-test.txt | paste -sd'|'))==" | paste -sd' ')"; \
	fi
	@scripts/kafka-jars.sh >/dev/null
	@scripts/s3proxy-jar.sh >/dev/null
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust stable with rustup (https://rustup.rs) and re-run" >&2; exit 2; }

build: deps
	cargo build --release --workspace

# The binary, its man pages and bash/zsh/fish completions (generated from the clap definitions) under
# $(DESTDIR)$(PREFIX), then the service files (install-files).
install: build
	install -Dm755 $(BIN) $(DESTDIR)$(PREFIX)/bin/ringcap
	$(BIN) generate man $(DESTDIR)$(PREFIX)/share/man/man1
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	for sh in bash zsh fish; do $(BIN) generate completions $$sh "$$tmp" || exit 1; done && \
	install -Dm644 "$$tmp/ringcap.bash" $(DESTDIR)$(PREFIX)/share/bash-completion/completions/ringcap && \
	install -Dm644 "$$tmp/_ringcap" $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_ringcap && \
	install -Dm644 "$$tmp/ringcap.fish" $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/ringcap.fish
	@# Wireshark's extcap folder gets a link, so Wireshark and tshark list ringcap's interfaces and its store.
	@extcap="$$(tshark -G folders 2>/dev/null | sed -n 's/^Extcap path:[[:space:]]*//p' | head -1)"; \
	if [ -n "$$extcap" ]; then \
	  install -d "$(DESTDIR)$$extcap" && ln -sf $(PREFIX)/bin/ringcap "$(DESTDIR)$$extcap/ringcap" && \
	  echo "Wireshark extcap: $$extcap/ringcap"; \
	else echo "Wireshark/tshark not found: no extcap link (install tshark, then make install again)"; fi
	@$(MAKE) --no-print-directory install-files

# The service (nothing to build, so tests call it alone): the systemd unit and its user in $(PREFIX)/lib
# (systemd reads /usr/local/lib/systemd/system and /usr/local/lib/sysusers.d; /etc/systemd/system stays the
# admin's), the sample config as /etc/ringcap/ringcap.toml unless one exists (never overwritten: it is the
# admin's), mode 0640 and group ringcap so only root and the service read it.
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
CONFDIR ?= /etc/ringcap
install-files:
	sed 's|/usr/local/bin/ringcap|$(PREFIX)/bin/ringcap|g' dist/ringcap.service | \
	  install -Dm644 /dev/stdin $(DESTDIR)$(UNITDIR)/ringcap.service
	install -Dm644 dist/ringcap.sysusers $(DESTDIR)$(SYSUSERSDIR)/ringcap.conf
	@# On the live system (no DESTDIR) create the user now, so the config can belong to its group.
	@if [ -z "$(DESTDIR)" ] && command -v systemd-sysusers >/dev/null; then \
	  systemd-sysusers $(SYSUSERSDIR)/ringcap.conf; fi
	install -d -m755 $(DESTDIR)$(CONFDIR)
	@if [ -e $(DESTDIR)$(CONFDIR)/ringcap.toml ]; then \
	  echo "$(DESTDIR)$(CONFDIR)/ringcap.toml exists: kept (the new sample is dist/ringcap.toml)"; \
	else \
	  install -m640 dist/ringcap.toml $(DESTDIR)$(CONFDIR)/ringcap.toml && \
	  if [ -z "$(DESTDIR)" ] && getent group ringcap >/dev/null; then chgrp ringcap $(CONFDIR)/ringcap.toml; fi && \
	  echo "sample config: $(DESTDIR)$(CONFDIR)/ringcap.toml (set interface, then systemctl enable --now ringcap)"; \
	fi

demo: build
	RINGCAP=$(BIN) scripts/demo.sh

# Tests need root (namespaces, veth, packet sockets); each test builds its own testbed.
test: build
	cargo test --release --workspace -- --test-threads=2

# The differential test against tcpdump at length (issue 33): more seeds, packets per file, file formats per
# link type, compressed variants and expressions than the bounded matrix `make test` runs.
# RINGCAP_DIFF_SEEDS=1-6 (or 3,7), RINGCAP_DIFF_PACKETS=1500 and RINGCAP_DIFF_JOBS=2 change it.
test-differential: build
	cargo test --release -p ringcap --test differential -- --ignored --nocapture --test-threads=1

# One hour of capture with rotation, compression, a budget and header records (MINUTES=N to shorten); not in CI.
soak: build
	RINGCAP=$(BIN) scripts/soak.sh

bench-capture: build
	RINGCAP=$(BIN) scripts/bench-capture.sh

bench-gen: build
	RINGCAP=$(BIN) scripts/bench-gen.sh

bench-disk: build
	RINGCAP=$(BIN) scripts/bench-disk.sh

bench-trace: build
	RINGCAP=$(BIN) scripts/bench-trace.sh

# Header records (issue 7): probe striping to two collectors vs capture -w; RUNS=1 PACKETS=200000 for a smoke test.
bench-records: build
	RINGCAP=$(BIN) scripts/bench-records.sh

# The time machine (issue 11): a >= 20 GB store, queries cold and warm against tcpdump -r; STORE_GB=1 RUNS=1 for a smoke test.
bench-query: build
	RINGCAP=$(BIN) scripts/bench-query.sh

# Everything on, measured whole (issue 37 item 3): ringcap capture -C 256MB --compress auto with the index and flow
# tables against tcpdump -w and tcpdump -w | zstd -1 on replayed synth traffic; DURATION=2s ROUNDS=1 for a smoke test.
bench-everything: build
	RINGCAP=$(BIN) scripts/bench-everything.sh

# An inner-host query over a VXLAN-wrapped store against the same traffic unwrapped (issue 36).
bench-tunnel: build
	RINGCAP=$(BIN) scripts/bench-tunnel-query.sh

# Beyond one sensor (issue 35): three sensors, a >= 5 GB archive on s3proxy, queries over both, upload against
# rclone, capture loss with archiving on; SIZE_GB=0.3 RUNS=1 UP_RUNS=1 LOSS_ROUNDS=1 for a smoke test.
bench-fleet: build
	RINGCAP=$(BIN) scripts/bench-fleet.sh

# A change measured in one run (issue 34): RINGCAP_BEFORE=an older binary; index, query and convert, interleaved.
bench-before-after: build
	RINGCAP=$(BIN) scripts/bench-before-after.sh

# AF_XDP capture and generator against ring, tcpdump and trafgen, with the XDP drop rate as the ceiling (issue 15).
bench-xdp: build
	RINGCAP=$(BIN) scripts/bench-xdp.sh

# A narrow filter with --source xdp: user space only vs the XDP prefilter vs tcpdump (issue 15).
bench-xdp-filter: build
	RINGCAP=$(BIN) PARTS=filter scripts/bench-xdp.sh

# The quick thesis baseline (ringcap bench, issue 5): results, plots and report in bench-out/baseline.
# --resume: an interrupted run continues; remove bench-out/baseline to measure again from scratch.
bench: build
	$(BIN) bench plans/thesis-baseline.toml --quick --out bench-out/baseline --resume

fmt:
	cargo fmt --all

clippy:
	cargo clippy --workspace --all-targets -- -D warnings

clean:
	cargo clean
