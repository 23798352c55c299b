"""One rank of ``rebasectl test --multi-gpu N``: pytest, as torchrun starts it on every rank.

torchrun ends every other rank as soon as one exits non-zero; pytest exits 1 when a test failed.
A test failing on rank 1 (the launcher's own fake suite does that on purpose) then killed rank 0
before it wrote its JUnit XML, whenever rank 0 was the slower one (a busy machine), and the run
was reported as a crash ("rank 0 wrote no JUnit XML") instead of as that test's failure. Here a
failed test is exit 0: each rank runs its whole suite and writes its XML, which carries the
verdict (``testing.run_torchrun`` merges them). Any other pytest exit (interrupted, internal or
usage error, 2-4) stays what it is, and a rank that hangs is still ended by the run's timeout.
"""

from __future__ import annotations

import sys

import pytest

TEST_FAILED = 1  # pytest.ExitCode.TESTS_FAILED


def main(args: list[str]) -> int:
    code = int(pytest.main(args))
    return 0 if code == TEST_FAILED else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
