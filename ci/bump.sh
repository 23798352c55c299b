#!/usr/bin/env bash
# Carry the series onto a new upstream revision: the per-upstream-bump CI job, runnable locally.
#
#   ci/bump.sh [TARGET]        TARGET: upstream revision (default: the branch in series.yaml)
#
# Environment: REBASECTL (command, default `rebasectl`), REBASECTL_DIR (the series checkout,
# default .), REBASECTL_UPSTREAM (upstream URL or mirror path, else series.yaml's url),
# ARTIFACTS (default artifacts/bump), PROPOSE (default 1: on a conflict, also `bump --propose`
# into $ARTIFACTS/proposals when this rebasectl has it), RUN_TESTS=1 (bump --test: the regression suite on the bumped tree), GITHUB_OUTPUT (set by Actions: result=clean|conflicts, to=sha).
# rebasectl writes its artifacts into $ARTIFACTS/rebasectl (a folder it owns); this script writes
# bump-stdout.json and pr-body.md beside it.
# Exit: 0 clean (series exported, report in $ARTIFACTS/rebasectl/report.md, PR body in
# $ARTIFACTS/pr-body.md), 1 conflicts (one `patches/FILE:LINE: ...` line per conflict region on
# stderr, for the problem matcher; resumable artifacts in $ARTIFACTS/rebasectl), 2 bad input,
# 3 tests failed (with RUN_TESTS=1).
set -uo pipefail
REBASECTL=${REBASECTL:-rebasectl}
DIR=${REBASECTL_DIR:-.}
ARTIFACTS=${ARTIFACTS:-artifacts/bump}
mkdir -p "$ARTIFACTS"
ARTIFACTS=$(cd "$ARTIFACTS" && pwd)
# the folder ignores itself (rebasectl's own folder inside it does the same): never clutter
[ -e "$ARTIFACTS/.gitignore" ] || printf '# written by ci/bump.sh: bump artifacts\n*\n' > "$ARTIFACTS/.gitignore"
OWN="$ARTIFACTS/rebasectl"

target=${1:-}
if [ -z "$target" ]; then
  target=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["upstream"]["branch"])' \
    "$DIR/series.yaml") || exit 2
fi

up=()
[ -n "${REBASECTL_UPSTREAM:-}" ] && up=(--upstream "$REBASECTL_UPSTREAM")
$REBASECTL -C "$DIR" fetch "${up[@]}" || exit $?

extra=()
[ "${RUN_TESTS:-0}" = 1 ] && extra+=(--test)
REBASECTL_ANNOTATE=1 $REBASECTL -C "$DIR" bump --to "$target" --artifacts "$OWN" --json "${extra[@]}" \
  > "$ARTIFACTS/bump-stdout.json"
rc=$?

result=$(python3 - "$OWN/bump.json" <<'PY'
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("error", "")
    raise SystemExit(0)
print(data["result"], data["to"])
PY
)
read -r outcome to <<<"$result"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  { echo "result=$outcome"; echo "to=$to"; echo "exit=$rc"; } >> "$GITHUB_OUTPUT"
fi

if [ "$rc" = 0 ] && [ -f "$OWN/report.md" ]; then
  # a pull request body is limited to 65536 characters
  python3 - "$OWN/report.md" "$ARTIFACTS/pr-body.md" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
limit = 60000
if len(text) > limit:
    text = text[:limit] + "\n\n_(report truncated: the full report.md is in the run's artifacts)_\n"
open(sys.argv[2], "w", encoding="utf-8").write(text)
PY
fi
# on a conflict, the proposals for its regions (bump --propose computes and shows them, carries
# nothing), where this rebasectl has --propose: $ARTIFACTS/proposals/bump.json
if [ "$rc" = 1 ] && [ "${PROPOSE:-1}" = 1 ] \
   && $REBASECTL bump --help 2>/dev/null | grep -q -- '--propose'; then
  $REBASECTL -C "$DIR" bump --to "$target" --propose --artifacts "$ARTIFACTS/proposals" --json \
    > /dev/null 2>&1 || true
fi
if [ "$rc" = 1 ] && [ -f "$OWN/README.md" ]; then
  cat "$OWN/README.md"
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$OWN/README.md" >> "$GITHUB_STEP_SUMMARY"; fi
fi
exit "$rc"
