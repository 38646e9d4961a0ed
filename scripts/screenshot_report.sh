#!/usr/bin/env bash
# Open a `posfair audit` HTML report in headless Chromium (Debian's `chromium` package) and save a screenshot,
# to see that the self-contained page renders: tables, the inlined plot, the examples.
# Usage: scripts/screenshot_report.sh REPORT.html OUT.png
set -euo pipefail
report="$(realpath "$1")"
out="$(realpath -m "$2")"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --window-size=1200,2400 \
  --screenshot="$out" "file://$report" 2>/dev/null
test -s "$out" && echo "rendered $report -> $out"
