#!/usr/bin/env bash
# Installs headless Chromium (Debian's chromium package) for the browser
# test of the debug page, once: it does nothing when chromium is already on
# the PATH, and runs apt-get update only when the package must be installed.
# Usage: hack/chromium.sh            install if missing
#        hack/chromium.sh --print    print the binary's path (empty if none)
set -euo pipefail
find_chromium() {
  for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}
if [[ "${1:-}" == "--print" ]]; then find_chromium || true; exit 0; fi
if path=$(find_chromium); then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "hack/chromium.sh: no chromium on the PATH and no apt-get to install it: install Chromium, or set CONVERGE_CHROMIUM to its binary" >&2
  exit 1
fi
sudo=""
if (( EUID != 0 )); then sudo="sudo"; fi
echo "hack/chromium.sh: installing Debian's chromium package (once)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
find_chromium >/dev/null
