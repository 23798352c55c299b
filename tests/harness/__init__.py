"""The tool tests' shared harness: how a test runs rebasectl and builds git history.

* ``tests.harness.cli``: ``run``/``ok``/``fails`` call the click app in this process (no
  interpreter start, no import of the CLI per step: the suite's main cost before); ``spawn`` and
  ``popen`` start ``python -m rebasectl`` where the process boundary is what is tested (signals,
  SIGKILL at a fault point, the repository lock held by another process, exit by signal).
* ``tests.harness.git``: ``Repo`` (a real repository with a deterministic clock), ``git`` (one git
  command that must succeed), ``head_of``/``tree_of``, ``lines``.

Nothing here changes directory or installs a signal handler for the test process.
"""
