# The pinned S3 servers the tests run against (started by
# internal/testkit/miniotest; gofakes3, the third, is a Go dependency).
MINIO_PKG := github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
VERSITYGW_PKG := github.com/versity/versitygw/cmd/versitygw@v1.8.0
GOBIN_DIR := $(or $(shell go env GOBIN),$(shell go env GOPATH)/bin)
# The Claude Code that cmd/panto's tests resume an exported session in
# (claudeCodeVersion in cmd/panto/export_agent_test.go): npm's
# native build for this machine, kept in the user's cache.
CLAUDE_CODE_VERSION := 2.1.332
TEST_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/panto-test
CLAUDE_CODE_DIR := $(TEST_CACHE)/claude-code-$(CLAUDE_CODE_VERSION)
# The Codex that cmd/panto's tests resume an exported session in
# (codexVersion there): npm's native build for this machine.
CODEX_VERSION := 0.171.0
CODEX_DIR := $(TEST_CACHE)/codex-$(CODEX_VERSION)
# The pi that cmd/panto's tests go on with an exported session in
# (piVersion there): npm's package, with its dependencies.
PI_VERSION := 0.73.1
PI_DIR := $(TEST_CACHE)/pi-$(PI_VERSION)

.PHONY: all build test servers minio versitygw chromium claude-code codex pi npm bench fuzz vet

all: build

build:
	go build -o bin/ ./cmd/...

# test installs the servers that are missing; the test binaries start them.
# One package at a time (-p 1): each starts its own servers, and a 4-node
# MinIO beside another package's servers on 2 cores has answered NoSuchKey
# for objects it held (README, Development).
test: servers
	go vet ./...
	go test -race -p 1 -timeout 45m ./...

servers: minio versitygw chromium claude-code codex pi

# chromium renders the HTML export in cmd/panto's tests (Debian's package).
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; else \
		echo "chromium not found: installing Debian's package"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi

# claude-code fetches the native Claude Code from npm (about 190 MB, once):
# panto export --format claude-code is checked by resuming its output in it.
claude-code: npm
	@if [ -x "$(CLAUDE_CODE_DIR)/claude" ] || [ -n "$$PANTO_CLAUDE_CODE" ]; then :; else \
		echo "Claude Code $(CLAUDE_CODE_VERSION) not found: fetching it from npm into $(CLAUDE_CODE_DIR) (about 190 MB, once)"; \
		os=$$(uname -s | tr A-Z a-z); arch=$$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/'); \
		tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		(cd "$$tmp" && npm pack --silent "@anthropic-ai/claude-code-$$os-$$arch@$(CLAUDE_CODE_VERSION)" >/dev/null) && \
		tar xzf "$$tmp"/*.tgz -C "$$tmp" && mkdir -p "$(CLAUDE_CODE_DIR)" && \
		install -m 0755 "$$tmp/package/claude" "$(CLAUDE_CODE_DIR)/claude"; \
	fi

# codex fetches the native Codex from npm (420 MB unpacked, once): panto
# export --format codex is checked by resuming its output in it.
codex: npm
	@if [ -x "$(CODEX_DIR)/codex" ] || [ -n "$$PANTO_CODEX" ]; then :; else \
		echo "Codex $(CODEX_VERSION) not found: fetching it from npm into $(CODEX_DIR) (once)"; \
		os=$$(uname -s | tr A-Z a-z); arch=$$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/'); \
		tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		(cd "$$tmp" && npm pack --silent "@openai/codex@$(CODEX_VERSION)-$$os-$$arch" >/dev/null) && \
		mkdir -p "$(CODEX_DIR)" && tar xzf "$$tmp"/*.tgz -C "$(CODEX_DIR)" && \
		ln -sf "$$(cd "$(CODEX_DIR)" && ls -d package/vendor/*/bin/codex | head -1)" "$(CODEX_DIR)/codex"; \
	fi

# pi installs pi with npm (about 200 MB with its dependencies, once):
# panto export --format pi is checked by going on with its output in it.
pi: npm
	@if [ -x "$(PI_DIR)/node_modules/.bin/pi" ] || [ -n "$$PANTO_PI" ]; then :; else \
		echo "pi $(PI_VERSION) not found: installing it with npm into $(PI_DIR) (about 200 MB, once)"; \
		mkdir -p "$(PI_DIR)" && npm install --silent --no-audit --no-fund --prefix "$(PI_DIR)" "@mariozechner/pi-coding-agent@$(PI_VERSION)"; \
	fi

# npm (and node, which pi runs on) from Debian's packages when missing.
npm:
	@if command -v npm >/dev/null 2>&1; then :; else \
		echo "npm not found: installing Debian's package"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq npm; \
	fi

minio:
	@if command -v minio >/dev/null 2>&1 || [ -x "$(GOBIN_DIR)/minio" ] || [ -n "$$PANTO_MINIO" ]; then :; else \
		echo "MinIO not found: installing $(MINIO_PKG) (a few minutes, once)"; \
		go install $(MINIO_PKG); \
	fi

versitygw:
	@if command -v versitygw >/dev/null 2>&1 || [ -x "$(GOBIN_DIR)/versitygw" ] || [ -n "$$PANTO_VERSITYGW" ]; then :; else \
		echo "versitygw not found: installing $(VERSITYGW_PKG) (about two minutes, once)"; \
		go install $(VERSITYGW_PKG); \
	fi

bench: minio
	go test -run '^$$' -bench . -benchtime 1x ./...

# fuzz runs each fuzz target for FUZZTIME (default 30s): every Fuzz* of
# the repository is listed here (a test fails on one left out). Inputs
# that find new coverage are minimized in at most FUZZMINIMIZE runs (Go's
# default, a minute each, would leave the slower targets hardly fuzzing).
FUZZTIME ?= 30s
FUZZMINIMIZE ?= 100x
FUZZ_TARGETS := \
	internal/sessionlog:FuzzParse \
	importer:FuzzClaudeCode \
	importer:FuzzCodex \
	importer:FuzzCodexForkLinked \
	importer:FuzzPi \
	importer:FuzzUnderStoredHeader \
	internal/sessionlog:FuzzSummarizeLine \
	internal/sessionlog:FuzzUnquote \
	internal/manifest:FuzzManifest \
	internal/manifest:FuzzIndexShard \
	internal/manifest:FuzzIndexFold \
	internal/manifest:FuzzMarker \
	internal/manifest:FuzzTombstone \
	internal/manifest:FuzzCatalog \
	internal/manifest:FuzzReplacedList \
	internal/gobmap:FuzzDecode \
	internal/manifest:FuzzSealedManifest \
	internal/manifest:FuzzSealedIndexShard \
	internal/seal:FuzzParseKeyFile \
	internal/seal:FuzzOpen \
	internal/project:FuzzNormalizeRemote \
	internal/project:FuzzRemoteSpellings \
	internal/project:FuzzConfigValue \
	internal/project:FuzzSSHAlias \
	store/fsjsonl:FuzzListCache \
	internal/importrecord:FuzzRecord
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./$$pkg; \
	done
