#!/usr/bin/env bash
# check_install.sh — `make install` into a temporary prefix, then a program built from that
# prefix alone with pkg-config's flags (tests/install/consumer.c), run; the examples built the same
# way (they need GPUs to run). Prints "[  PASSED  ] 1
# test(s)." or "[  FAILED  ] 1 test(s)" (tests/run.sh's lines). Skipped (passed, said) where
# pkg-config is missing.
set -u
cd "$(dirname "$0")/.."
if ! command -v pkg-config >/dev/null; then
  echo "install check SKIPPED: pkg-config is not installed"; echo "[  PASSED  ] 0 test(s)."; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "install check: $*"; echo "[  FAILED  ] 1 test(s)"; exit 1; }
make --no-print-directory -s install PREFIX="$tmp/prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install failed"; }
for f in include/meld.h lib/libmeld.so lib/libmeld.a lib/pkgconfig/meld.pc; do
  [ -f "$tmp/prefix/$f" ] || fail "$f was not installed"
done
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
v=$(pkg-config --modversion meld) || fail "pkg-config does not find meld"
cflags=$(pkg-config --cflags meld) && libs=$(pkg-config --libs meld) || fail "pkg-config flags"
# (only the installed prefix: no -I or -L of this tree)
${CC:-cc} -std=c11 -Wall -Wextra -Werror $cflags tests/install/consumer.c -o "$tmp/consumer" $libs || fail "the consumer does not build with: $cflags / $libs"
out=$("$tmp/consumer") || fail "the consumer failed: $out"
echo "$out (pkg-config meld $v: $cflags $libs)"
# the examples (examples/*.c) build from the installed prefix alone too (run on GPUs: examples/run.sh)
for ex in examples/*.c; do
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror $cflags "$ex" -o "$tmp/$(basename "$ex" .c)" $libs -lm || fail "$ex does not build against the installed meld"
done
echo "examples built against the installed meld: $(ls examples/*.c | xargs -n1 basename | tr '\n' ' ')"
echo "[  PASSED  ] 1 test(s)."
