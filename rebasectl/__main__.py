"""``python -m rebasectl``."""

from .cli import main

main()
