#!/usr/bin/env bash
# Stock OPA decides what policycheck decides, from the JSON documents
# policycheck prints: for every example history, with and without the
# example policies, under each example context (and none), `opa eval` (the
# OPA version in go.mod) on `policycheck facts --format input` with the
# registry data of `policycheck registry` gives the same available,
# advertised and verdicts as `policycheck eval`. No conversion: the JSON
# arrays go in as printed. scripts/rego-checks.sh runs this (hence
# .ci/run); it exits 1 on the first disagreement and shows both sides.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Stock OPA built once: rego-checks.sh passes its build in $STOCK_OPA;
# run alone, this script builds its own (a `go run` per call would start
# the go command forty times).
# Outside CI, without the network to fetch it, this is skipped with a
# note; under CI=true that fails (scripts/fetch.sh).
if [ -z "${STOCK_OPA:-}" ]; then
	# shellcheck source=scripts/fetch.sh
	source scripts/fetch.sh
	version=$(go list -m -f '{{.Version}}' github.com/open-policy-agent/opa)
	if ! go_tool "$tmp/bin" "github.com/open-policy-agent/opa@${version}" "the comparison with stock opa eval"; then
		exit 0
	fi
	STOCK_OPA="$tmp/bin/opa"
fi
opa() { "$STOCK_OPA" "$@"; }
go build -o "$tmp/policycheck" ./cmd/policycheck
pc="$tmp/policycheck"

# The registry as data, at data.policycheck.registry (a bundle-style
# directory: opa loads dir/policycheck/registry/data.json there).
mkdir -p "$tmp/registry/policycheck/registry"
"$pc" registry --registry examples/registry.yaml >"$tmp/registry/policycheck/registry/data.json"

# The comparison runs in stock OPA too (no jq): the decision of the
# policies over the JSON input against the engine's, at data.expected.
cat >"$tmp/compare.rego" <<'EOF'
package stock_opa_agrees

d := data.policycheck.availability.decision

sides := {
	"opa eval": {"available": sort(d.available), "advertised": sort(d.advertised), "verdicts": [v.verdict | some v in d.verdicts]},
	"policycheck eval": {"available": data.expected.available, "advertised": data.expected.advertised, "verdicts": [c.verdict | some c in data.expected.calls]},
}

agree if sides["opa eval"] == sides["policycheck eval"]
EOF

n=0
for history in examples/histories/*.json; do
	for policy in "" examples/policies; do
		for ctx in "" examples/context/*.json; do
			args=(--registry examples/registry.yaml --history "$history")
			[ -n "$ctx" ] && args+=(--context "$ctx")
			opa_data=(-d policies -d "$tmp/registry" -d "$tmp/compare.rego" -d "$tmp/expected")
			if [ -n "$policy" ]; then
				args+=(--policy "$policy")
				opa_data+=(-d "$policy")
			fi
			mkdir -p "$tmp/expected/expected"
			"$pc" facts --format input "${args[@]}" >"$tmp/input.json"
			"$pc" eval "${args[@]}" >"$tmp/expected/expected/data.json"
			if ! opa eval --fail --ignore '*_test.rego' -i "$tmp/input.json" "${opa_data[@]}" \
				'data.stock_opa_agrees.agree' >/dev/null; then
				echo "stock opa eval and policycheck eval disagree: ${args[*]}" >&2
				opa eval --ignore '*_test.rego' -f pretty -i "$tmp/input.json" "${opa_data[@]}" \
					'data.stock_opa_agrees.sides' >&2
				exit 1
			fi
			n=$((n + 1))
		done
	done
done
echo "stock opa eval agrees with policycheck eval on $n runs"
