"""pycheck.py — the checks of the Python unit tests (tests/unit/test_*.py): check(cond, what)
counts, finish() prints the "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" lines that
tests/run.sh sums and exits 1 if any failed."""
import sys

_passed = 0
_failed = 0


def check(cond, what):
    global _passed, _failed
    if cond:
        _passed += 1
    else:
        _failed += 1
        print(f"FAIL: {what}")


def add(passed, failed):
    """Adds counts made elsewhere (e.g. by child processes) to this process's."""
    global _passed, _failed
    _passed += passed
    _failed += failed


def counts():
    return _passed, _failed


def finish():
    if _passed:
        print(f"[  PASSED  ] {_passed} test(s).")
    if _failed:
        print(f"[  FAILED  ] {_failed} test(s)")
    sys.exit(1 if _failed else 0)
