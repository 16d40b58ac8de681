#!/usr/bin/env bash
# pack_bins.sh — packs built binaries into build/carry/bins.tar.xz for the device tool's `carry`
# (the carry limit, 64 MiB with the tracked tree, holds ~25 MB of unpacked binaries; packed, the
# GPU tests and bench_inproc are ~8 MB). On the device: `tar xJf build/carry/bins.tar.xz`
# (bench/device_env.sh does it when the file is there), then PREBUILT=1.
# Usage: bench/pack_bins.sh build/tests/gpu/test_* build/bench/bench_inproc ...
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 BINARY..."; exit 2; }
mkdir -p build/carry
tar cf - "$@" | xz -6 -T2 > build/carry/bins.tar.xz
# (device_env.sh's "unpacked" mark, left where it was sourced on this machine, would travel with
# the carry and keep the device from unpacking the new archive)
rm -f build/carry/.unpacked
# The commit the binaries were built from ("+dirty": with uncommitted changes under src, include,
# bench or tests): the device's copy of .git stays at the session's first commit, so the benches'
# JSON "commit" would be that one (sessions 32-34 recorded their first commit on every row).
# bench/device_env.sh exports it as BENCH_COMMIT.
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include bench tests 2>/dev/null || echo +dirty)" \
  > build/carry/COMMIT
ls -la build/carry/bins.tar.xz
