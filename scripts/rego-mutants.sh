#!/usr/bin/env bash
# The slow half of the mutation check of the shipped gate: for every mutant
# of policies/lib and policies/availability that compiles (the same mutants
# TestMutantsOfTheGateAreKilled runs the Rego tests against, in-process),
# run `go test ./policies/... ./engine/` on a copy of the working tree with
# the mutant in place, and print one line per mutant:
#
#   <index>  killed|SURVIVED  <mutant ID>
#
# then the totals. Not part of .ci/run: each mutant rebuilds and reruns the
# engine's tests (minutes each). Usage:
#
#   bash scripts/rego-mutants.sh            # every mutant
#   bash scripts/rego-mutants.sh 'verdict'  # the mutants whose ID matches an extended regexp
#
# Exit status 1 when a mutant survived. docs/testing.md explains how to read
# the result and where the equivalent mutants are listed.
set -euo pipefail
cd "$(dirname "$0")/.."
filter=${1:-}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo"
# The working tree as it is (tracked and new files), not HEAD.
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tmp/repo"
if [ -d ../shared ]; then
	ln -s "$(cd ../shared && pwd)" "$tmp/shared"
fi

go build -o "$tmp/regomutant" ./internal/tools/regomutant/cmd/regomutant
(cd "$tmp/repo" && "$tmp/regomutant" list) >"$tmp/list"

killed=0 survived=0 total=0
while IFS=$'\t' read -r index file id; do
	if [ -n "$filter" ] && ! grep -Eq -- "$filter" <<<"$id"; then
		continue
	fi
	cp "$tmp/repo/$file" "$tmp/original.rego"
	(cd "$tmp/repo" && "$tmp/regomutant" write "$index" .)
	if (cd "$tmp/repo" && go test -count=1 -failfast -skip TestMutantsOfTheGateAreKilled ./policies/... ./engine/ >"$tmp/log" 2>&1); then
		survived=$((survived + 1))
		printf '%s\tSURVIVED\t%s\n' "$index" "$id"
	else
		killed=$((killed + 1))
		printf '%s\tkilled\t%s\n' "$index" "$id"
	fi
	total=$((total + 1))
	cp "$tmp/original.rego" "$tmp/repo/$file"
done <"$tmp/list"

echo "go test ./policies/... ./engine/: $killed killed / $total mutants, $survived survived" \
	"(survivors listed as equivalent in policies/mutation_test.go are expected)"
[ "$survived" -eq 0 ]
