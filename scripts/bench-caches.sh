#!/usr/bin/env bash
# What each cache saves (docs/caches.md): every cache's on/off benchmark,
# six interleaved rounds, then benchstat by the cache turned off. Takes
# about ten minutes on two idle cores; writes engine.txt and server.txt in
# the current directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go test -c -o "$tmp/engine.test" ./engine && go test -c -o "$tmp/server.test" ./server)
for r in 1 2 3 4 5 6; do
  (cd "$root/engine" && "$tmp/engine.test" -test.run XXX -test.bench 'CacheSavings/workload=(conversation|repeat)/' -test.benchtime 1000x -test.cpu 1 -test.benchmem)
  (cd "$root/engine" && "$tmp/engine.test" -test.run XXX -test.bench 'CacheSavings/workload=never-seen/' -test.benchtime 300x -test.cpu 1 -test.benchmem)
done | tee "$out/engine.txt"
for r in 1 2 3 4 5 6; do
  (cd "$root/server" && "$tmp/server.test" -test.run XXX -test.bench 'CacheSavings/workload=growing/' -test.benchtime 60x -test.cpu 1)
  (cd "$root/server" && "$tmp/server.test" -test.run XXX -test.bench 'CacheSavings/workload=never-seen/' -test.benchtime 30x -test.cpu 1)
  (cd "$root/server" && "$tmp/server.test" -test.run XXX -test.bench 'CacheSavings/workload=repeat-registry/' -test.benchtime 20x -test.cpu 1)
done | tee "$out/server.txt"
benchstat="go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"
(cd "$root" && $benchstat -col /off "$out/engine.txt" && $benchstat -col /off "$out/server.txt")
