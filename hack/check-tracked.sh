#!/usr/bin/env bash
# Fails when git tracks a build output: an executable binary (ELF, Mach-O, PE
# or a Go archive) or any file over 1 MiB. Scripts with an executable bit are
# fine; they start with "#!".
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ]; then
    echo "tracked file over 1 MiB: $f ($size bytes)"; bad=1; continue
  fi
  magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface | 4d5a* | 213c6172)
      echo "tracked executable binary: $f"; bad=1 ;;
  esac
done < <(git ls-files -z)
if [ "$bad" -ne 0 ]; then
  echo "remove these from git (git rm --cached) and ignore them in .gitignore"
  exit 1
fi
