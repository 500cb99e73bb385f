#!/bin/sh
# The test suite on a loaded machine: two CPU hogs run beside `go test ./...`
# RUNS times in a row (default 10), and the script says how many passed.
# The suite must pass every time: live tests assert what the protocol
# guarantees, never timing (docs/testing.md). Run it from the repository
# root:  sh docs/loaded-tests.sh [RUNS] [go test flags...]
set -u
runs=${1:-10}
[ $# -gt 0 ] && shift
go test -count=1 -run XXX ./... >/dev/null || exit 1 # compile once, outside the count
yes >/dev/null & h1=$!
yes >/dev/null & h2=$!
trap 'kill $h1 $h2 2>/dev/null' EXIT INT TERM
pass=0
i=1
while [ "$i" -le "$runs" ]; do
	start=$(date +%s)
	if go test -count=1 "$@" ./... >"loaded-tests-$i.log" 2>&1; then
		pass=$((pass + 1))
		echo "run $i: ok in $(($(date +%s) - start)) s"
		rm -f "loaded-tests-$i.log"
	else
		echo "run $i: FAILED in $(($(date +%s) - start)) s (loaded-tests-$i.log):"
		grep -E '^(--- FAIL|FAIL|panic)' "loaded-tests-$i.log" | head -20
	fi
	i=$((i + 1))
done
echo "$pass of $runs runs passed under two CPU hogs"
[ "$pass" -eq "$runs" ]
