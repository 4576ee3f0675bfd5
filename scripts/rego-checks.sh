#!/usr/bin/env bash
# Rego checks with the stock OPA binary at the version in go.mod, so the
# policies and their tests never depend on our binary: opa fmt, opa check
# --strict and opa test over the shipped policies, the scenario fixtures
# (policy_test/) and the example operator policies, and stock opa eval on
# the JSON input documents against policycheck eval. scripts/test.sh runs
# this; `go test ./...` runs the same tests through policycheck test.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(go list -m -f '{{.Version}}' github.com/open-policy-agent/opa)
# Built once (go install into a temporary directory) and shared with
# stock-opa-agrees.sh through $STOCK_OPA: a `go run` per call costs the go
# command's start and staleness check each time (some forty calls).
# Outside CI, without the network to fetch it, these checks are skipped
# with a note (go test runs the same Rego tests through policycheck test);
# under CI=true that fails (scripts/fetch.sh).
if [ -z "${STOCK_OPA:-}" ]; then
	# shellcheck source=scripts/fetch.sh
	source scripts/fetch.sh
	opa_dir=$(mktemp -d)
	trap 'rm -rf "$opa_dir"' EXIT
	if ! go_tool "$opa_dir" "github.com/open-policy-agent/opa@${version}" "the rego checks with stock opa"; then
		exit 0
	fi
	export STOCK_OPA="$opa_dir/opa"
fi
opa() { "$STOCK_OPA" "$@"; }

rego_dirs=(policies examples/policies policy_test)

echo "== opa fmt --list --fail ${rego_dirs[*]}"
opa fmt --list --fail "${rego_dirs[@]}"

echo "== opa check --strict ${rego_dirs[*]}"
opa check --strict "${rego_dirs[@]}"

# Stock opa test loads every JSON and YAML file as data: keep the example
# histories, contexts and registries out of it (policycheck test follows the
# bundle convention and loads only data.json/data.yaml).
echo "== opa test policies/ policy_test/ examples/"
opa test policies/ policy_test/ examples/ --ignore histories --ignore context --ignore registry.yaml --ignore registries --ignore trust

echo "== opa test policies/ --coverage (shipped policies, at least 95%)"
opa test policies/ --coverage --threshold 95 >/dev/null

echo "== stock opa eval on the JSON input agrees with policycheck eval"
bash scripts/stock-opa-agrees.sh
