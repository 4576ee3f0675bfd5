#!/usr/bin/env bash
# The prompt-injection evaluation (issue 47 item 6): decides every
# AgentDojo-style run of examples/agentdojo under each policy mode and
# prints utility (benign calls executed) and security (injected calls
# stopped) per suite and overall, and by placement class. The test fails
# when the numbers differ from examples/agentdojo/expected.md; pass
# -update to rewrite it on purpose (then copy the table to BENCHMARKS.md
# and docs/flows.md).
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./examples -run '^TestAgentDojoEvaluation$' -count=1 -v "$@" |
	sed -n 's/^        //; /^|/p; /^Injected calls stopped/p; /^---\|^ok\|^FAIL/p'
