"""Stand-in for the ``miles`` package: only what Megatron's routing replay imports (tests only)."""
