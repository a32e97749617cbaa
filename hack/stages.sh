#!/usr/bin/env bash
# Runs the given make targets one after another, then prints how long each
# took (also when one fails, which stops the run).
# Usage: hack/stages.sh TARGET...
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
names=() times=() results=()
status=0
for stage in "$@"; do
  t0=$(date +%s)
  echo "=== make $stage"
  $make --no-print-directory "$stage"
  rc=$?
  names+=("$stage"); times+=("$(( $(date +%s) - t0 ))")
  if (( rc != 0 )); then results+=("FAILED (exit $rc)"); status=$rc; break; fi
  results+=("ok")
done
total=0
echo
echo "stage          seconds  result"
for i in "${!names[@]}"; do
  printf '%-14s %7s  %s\n' "${names[$i]}" "${times[$i]}" "${results[$i]}"
  total=$(( total + times[i] ))
done
printf '%-14s %7s\n' "total" "$total"
exit $status
