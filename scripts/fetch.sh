# shellcheck shell=bash
# Sourced by scripts/test.sh, rego-checks.sh and stock-opa-agrees.sh: the
# steps that reach the network (a tool at a pinned version, the modules
# go mod tidy reads). Each tries the fetch for real. When it fails,
# outside CI the step is skipped with a note saying what did not run and
# why, as the chromium and haproxy tests skip; under CI=true the run
# fails. docs/offline_test.go holds these functions to that.

# unfetchable WHAT WHY: WHAT could not be fetched; WHY is the go
# command's last line of error. Under CI=true it says so and exits 1;
# otherwise it prints a note that WHAT is skipped and returns 0.
unfetchable() {
	local what=$1 why=$2
	if [ "${CI:-}" = "true" ]; then
		echo "CI=true but $what could not be fetched: $why" >&2
		exit 1
	fi
	echo "note: skipping $what: it could not be fetched (offline?): $why; under CI=true this fails" >&2
}

# last_line TEXT: the last non-blank line of TEXT.
last_line() {
	printf '%s\n' "$1" | grep -v '^[[:space:]]*$' | tail -n 1
}

# go_tool DIR PKG@VERSION WHAT: installs PKG@VERSION into DIR (the binary
# is DIR/<last element of PKG>) and returns 0. When its modules cannot be
# fetched it calls unfetchable, so it exits 1 under CI=true and otherwise
# returns 1: the caller skips what needs the tool. The fetch is tried on
# its own first (go install -n resolves and downloads every module, and
# builds nothing), so a tool that fetches but does not build exits 1
# everywhere rather than pass for being offline.
go_tool() {
	local dir=$1 pkg=$2 what=$3 out
	if ! out=$(GOBIN="$dir" go install -n "$pkg" 2>&1); then
		unfetchable "$what ($pkg)" "$(last_line "$out")"
		return 1
	fi
	if ! GOBIN="$dir" go install "$pkg"; then
		echo "go install $pkg failed" >&2
		exit 1
	fi
}

# go_mod_tidy_diff: go mod tidy -diff in the current module. An untidy
# go.mod or go.sum (tidy prints a diff) exits 1 everywhere; a tidy that
# could not run, with no diff (a module it reads could not be fetched),
# is unfetchable.
go_mod_tidy_diff() {
	local diff err
	diff=$(mktemp)
	err=$(mktemp)
	if go mod tidy -diff >"$diff" 2>"$err"; then
		rm -f "$diff" "$err"
		return 0
	fi
	if [ -s "$diff" ]; then
		cat "$diff"
		rm -f "$diff" "$err"
		echo "go.mod or go.sum is not tidy: run go mod tidy and commit the result" >&2
		exit 1
	fi
	local why
	why=$(last_line "$(cat "$err")")
	rm -f "$diff" "$err"
	unfetchable "go mod tidy -diff (the modules it reads)" "$why"
}
