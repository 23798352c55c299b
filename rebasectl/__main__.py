"""``python -m rebasectl``."""

from ._entry import main

main()
