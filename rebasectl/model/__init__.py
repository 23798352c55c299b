"""The model: a series (series.yaml), its patches, the diff they carry, the checkout's layout.
Pure data and parsing: imports infra, never git, an engine or the screen."""
