"""Infrastructure every layer may use: the error type and exit codes, fault points for kill
tests, confined file writes, the checkout lock, artifact ownership, the venv's site dir.
Imports nothing else of rebasectl."""
