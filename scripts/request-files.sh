#!/bin/bash
# Lists the module's files one request passes through: an incremental run
# step and a never-seen /v1/decide (internal/testkit/requestfiles), measured
# with coverage counters cleared just before the request. Usage:
#   bash scripts/request-files.sh [OUTDIR]
# prints the count of each and writes OUTDIR/{step,decide}.files.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
rm -rf "$out/step" "$out/decide"
bin=$(mktemp)
go build -cover -covermode=atomic -coverpkg=./... -o "$bin" ./internal/testkit/requestfiles
GOCOVERDIR=$out "$bin" "$out" 2>/dev/null
rm -f "$bin"
for k in step decide; do
	go tool covdata textfmt -i="$out/$k" -o "$out/$k.txt"
	awk 'NR>1 && $NF>0 {split($1,a,":"); print a[1]}' "$out/$k.txt" |
		sed 's#github.com/policycheck/policycheck/##' | grep -v '^internal/testkit/requestfiles/' | sort -u >"$out/$k.files"
	echo "$k: $(wc -l <"$out/$k.files") files ($out/$k.files)"
done
