#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 5s).
# Seed corpora live in each package's testdata/fuzz/<FuzzName>/ and in the
# f.Add calls; `go test` alone replays them as regression tests.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
status=0
for pkg in $(go list ./... | grep -v /test/e2e); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/converge-fuzz.log 2>&1; then
      cat /tmp/converge-fuzz.log
      status=1
    fi
  done
done
exit $status
