#!/usr/bin/env bash
# check_env_vars.sh — every MELD_* environment variable the library reads must be in the
# known list of src/host/config.c (otherwise users setting it are told it is unknown).
set -u
cd "$(dirname "$0")/.."
# every string literal that is exactly a MELD_* name (names inside sentences are not reads), and
# the Python binding's environment reads (it runs in the library's process)
used=$( (grep -rhoE '"MELD_[A-Z0-9_]+"' src; grep -rhoE 'environ(\.get\(|\[)"MELD_[A-Z0-9_]+"' python/meld |
        grep -oE '"MELD_[A-Z0-9_]+"') | tr -d '"' | grep -vx 'MELD_CONFIG_INIT' | sort -u)
known=$(sed -n '/g_known_env\[\] = {/,/NULL};/p' src/host/config.c | grep -oE 'MELD_[A-Z0-9_]+' | sort -u)
missing=$(comm -23 <(echo "$used") <(echo "$known"))
if [ -n "$missing" ]; then
  echo "MELD_* variables read but not in config.c's known list: $missing"
  echo "[  FAILED  ] 1 test(s): env var list"
  exit 1
fi
echo "[  PASSED  ] 1 test(s). ($(echo "$used" | wc -l) MELD_* variables read, all known)"
