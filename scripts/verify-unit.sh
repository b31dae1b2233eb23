#!/usr/bin/env bash
# Checks systemd/flashblocksd.service with systemd-analyze: `verify` must be silent and the offline security
# exposure must stay at or below MAX_EXPOSURE. Changes nothing outside a temp dir; needs systemd >= 250.
#
# The real ExecStart (/usr/local/bin/flashblocksd) is not installed on CI machines, and `verify` rejects a missing
# executable, so a copy of the unit with ExecStart pointed at /usr/bin/env is checked instead.
#
# Usage: scripts/verify-unit.sh [unit-file]    (MAX_EXPOSURE=2.0 by default; env overrides)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
unit="${1:-$here/systemd/flashblocksd.service}"
max_exposure="${MAX_EXPOSURE:-2.0}"

command -v systemd-analyze >/dev/null || { echo "verify-unit: systemd-analyze not found (apt-get install systemd)" >&2; exit 2; }
[ -f "$unit" ] || { echo "verify-unit: no unit file at $unit" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/$(basename "$unit")"
sed -E 's#^ExecStart=.*#ExecStart=/usr/bin/env#' "$unit" >"$copy"
grep -q '^ExecStart=/usr/bin/env$' "$copy" || { echo "verify-unit: $unit has no ExecStart= line" >&2; exit 1; }

# verify prints warnings (unknown keys, bad values) yet may still exit 0, so any output is a failure too.
status=0
out="$(systemd-analyze verify --man=no "$copy" 2>&1)" || status=$?
if [ "$status" -ne 0 ] || [ -n "$out" ]; then
  echo "verify-unit: systemd-analyze verify reported problems (exit $status):" >&2
  echo "$out" >&2
  exit 1
fi
echo "verify-unit: systemd-analyze verify: ok"

if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
  # --threshold takes tenths (the 0-100 scale systemd computes); the report prints that divided by ten.
  threshold="$(awk -v x="$max_exposure" 'BEGIN { printf "%d", x * 10 + 0.5 }')"
  report="$(systemd-analyze security --offline=true --threshold="$threshold" "$copy" 2>&1)" && sec=0 || sec=$?
  score="$(printf '%s\n' "$report" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
  if [ "$sec" -ne 0 ]; then
    printf '%s\n' "$report" | grep '✗' >&2 || true
    echo "verify-unit: exposure ${score:-unknown} is above $max_exposure (or security analysis failed, exit $sec)" >&2
    exit 1
  fi
  echo "verify-unit: systemd-analyze security exposure: $score (max $max_exposure)"
else
  echo "verify-unit: this systemd-analyze has no --offline security mode; skipped the exposure check"
fi
