#!/usr/bin/env bash
# Rego checks with the stock OPA binary at the version in go.mod, so the
# policies and their tests never depend on our binary: opa fmt, opa check
# --strict and opa test over the shipped policies, the scenario fixtures
# and the example operator policies. scripts/test.sh runs this.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(go list -m -f '{{.Version}}' github.com/open-policy-agent/opa)
opa() { go run "github.com/open-policy-agent/opa@${version}" "$@"; }

# Only the directories that exist yet.
fmt_paths=()
check_paths=()
test_paths=()
for p in policies examples/policies policy_test; do
	[ -d "$p" ] || continue
	fmt_paths+=("$p")
	test_paths+=("$p")
	check_paths+=("$p")
done

echo "== opa fmt --list --fail ${fmt_paths[*]}"
opa fmt --list --fail "${fmt_paths[@]}"

echo "== opa check --strict ${check_paths[*]}"
opa check --strict "${check_paths[@]}"

echo "== opa test ${test_paths[*]}"
opa test "${test_paths[@]}"
