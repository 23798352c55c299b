"""Commands: what cli.py calls. Each takes a Workspace and the parsed options, holds the lock,
drives the engines and returns a value the renderers show; none prints."""
