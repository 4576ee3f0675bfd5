#!/usr/bin/env bash
# Mutation testing of the Go fact logic: facts/ whole, and the loader's
# evidence reading (loader/history.go, where the decoder turns a history's
# JSON into reveals, loads, outcomes and compaction payloads). Each mutant
# is one small change to the code; the package's own tests must fail on
# it ("KILLED"). Uses github.com/go-gremlins/gremlins, pinned below.
#
#   bash scripts/mutation.sh              # facts and loader
#   bash scripts/mutation.sh facts        # one target
#
# Results go to .mutation/<target>.json (gremlins' report) and a summary
# to stdout; docs/testing.md says how to read them. Not part of .ci/run:
# a run compiles and tests the package once per mutant (tens of minutes
# on two shared cores).
set -euo pipefail
cd "$(dirname "$0")/.."

gremlins=github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
workers=${MUTATION_WORKERS:-2}
out=.mutation
mkdir -p "$out"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	targets=(facts loader)
fi

for target in "${targets[@]}"; do
	args=(unleash --workers "$workers" --timeout-coefficient 20 --output "$out/$target.json")
	case "$target" in
	facts) ;;
	loader)
		# The evidence reading only: the registry, the JSON Schema and
		# the JSON scanner are pinned by their own tests and would
		# triple the run.
		for f in registry schema json validate errors; do
			args+=(--exclude-files "$f\.go")
		done
		;;
	*)
		echo "unknown target $target (facts or loader)" >&2
		exit 2
		;;
	esac
	echo "== gremlins $target"
	go run "$gremlins" "${args[@]}" "./$target" | tee "$out/$target.log"
done
