#!/usr/bin/env bash
# After ci/bump.sh: tell the repository what the bump found, through the GitHub CLI.
#
#   clean, series changed  push rebasectl/bump-<sha12>, open (or update) its pull request with the
#                          report, close the older bump PRs it supersedes, close the conflict
#                          tracking issue, and (CHECKS_DISPATCH=1) start the check workflows on
#                          the branch with workflow_dispatch
#   clean, nothing to do   the series is already on the upstream's tip: a bump has landed, so
#                          the tracking issue is closed and any open bump PR for another sha too
#   conflicts              one tracking issue, labelled rebasectl-bump-conflict, opened or
#                          updated in place: which patches break at the upstream's tip, since
#                          which commit, the regions, the proposals when bump made some
#
# Environment: ARTIFACTS (default artifacts/bump; bump.sh's folder), REBASECTL_DIR (default .),
# BASE (the branch the PR targets, default main), REMOTE (default origin), GH (default gh),
# CHECKS_DISPATCH=1 when the token cannot start workflows by itself (the GITHUB_TOKEN: see
# ci/README.md), RUN_URL (a link to the run, else built from GITHUB_SERVER_URL/..._RUN_ID).
# Exit: 0 done, 1 a gh or git call failed, 2 no bump result to publish.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ARTIFACTS=${ARTIFACTS:-artifacts/bump}
[ -d "$ARTIFACTS" ] && ARTIFACTS=$(cd "$ARTIFACTS" && pwd)
DIR=${REBASECTL_DIR:-.}
BASE=${BASE:-main}
REMOTE=${REMOTE:-origin}
GH=${GH:-gh}
PR_LABEL=rebasectl-bump
ISSUE_LABEL=rebasectl-bump-conflict
if [ -z "${RUN_URL:-}" ] && [ -n "${GITHUB_RUN_ID:-}" ]; then
  RUN_URL="${GITHUB_SERVER_URL:-https://github.com}/${GITHUB_REPOSITORY:-}/actions/runs/${GITHUB_RUN_ID}"
fi
export RUN_URL=${RUN_URL:-}
json="$ARTIFACTS/rebasectl/bump.json"
[ -f "$json" ] || { echo "publish: no $json (the bump did not finish): nothing to publish" >&2; exit 2; }
read -r result to < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["result"], d["to"])' "$json")
short=${to:0:12}
branch="rebasectl/bump-$short"

# numbers of the open items gh lists, one per line; $1: pr|issue, then gh's filters
open_numbers() {
  local kind=$1; shift
  $GH "$kind" list --state open --limit 100 --json number "$@" \
    | python3 -c 'import json,sys; [print(i["number"]) for i in json.load(sys.stdin)]'
}
# open bump PRs whose branch is not $1
other_bump_prs() {
  $GH pr list --state open --limit 100 --label "$PR_LABEL" --json number,headRefName \
    | python3 -c 'import json,sys; [print(i["number"]) for i in json.load(sys.stdin) if i["headRefName"] != sys.argv[1]]' "$1"
}
close_tracking_issue() {
  local n
  for n in $(open_numbers issue --label "$ISSUE_LABEL"); do
    $GH issue close "$n" --comment "$1"
  done
}
close_superseded() {  # $1: the branch that stays, $2: what supersedes them
  local n
  for n in $(other_bump_prs "$1"); do
    $GH pr close "$n" --delete-branch --comment "Superseded by $2."
  done
}

if [ "$result" = conflicts ]; then
  # the proposals run (bump --propose, where it exists) holds the same regions and a proposal
  # for each it could resolve
  shown="$json"
  [ -f "$ARTIFACTS/proposals/bump.json" ] && shown="$ARTIFACTS/proposals/bump.json"
  python3 "$here/conflict_issue.py" "$shown" > "$ARTIFACTS/issue-body.md"
  title="Upstream bump conflicts at $short"
  existing=$(open_numbers issue --label "$ISSUE_LABEL" | head -n 1)
  if [ -n "$existing" ]; then
    $GH issue edit "$existing" --title "$title" --body-file "$ARTIFACTS/issue-body.md"
    echo "tracking issue #$existing updated"
  else
    $GH label create "$ISSUE_LABEL" --force --color B60205 \
      --description "rebasectl: the upstream bump conflicts (kept current by the daily job)"
    $GH issue create --title "$title" --body-file "$ARTIFACTS/issue-body.md" --label "$ISSUE_LABEL"
  fi
  exit 0
fi
[ "$result" = clean ] || { echo "publish: bump result '$result': nothing to publish" >&2; exit 2; }

cd "$DIR"
if [ -z "$(git status --porcelain -- series.yaml patches)" ]; then
  echo "series already on $short: nothing to propose"
  close_superseded "" "the series already on upstream $short"
  close_tracking_issue "The series is on upstream $short and every patch applies: a bump has landed."
  exit 0
fi
git config user.name >/dev/null || git config user.name "rebasectl-bot"
git config user.email >/dev/null || git config user.email "rebasectl-bot@users.noreply.github.com"
git switch -q -C "$branch"
git add -A -- series.yaml patches
git commit -q -m "Bump upstream to $short"
git push -q -f "$REMOTE" "$branch"
body="$ARTIFACTS/pr-body.md"
pr=$(open_numbers pr --head "$branch" | head -n 1)
if [ -n "$pr" ]; then
  $GH pr edit "$pr" --body-file "$body"
else
  $GH label create "$PR_LABEL" --force --color 0E8A16 --description "rebasectl: upstream bump"
  $GH pr create --base "$BASE" --head "$branch" --title "Bump upstream to $short" \
    --body-file "$body" --label "$PR_LABEL"
  pr=$(open_numbers pr --head "$branch" | head -n 1)
fi
close_superseded "$branch" "#$pr (upstream $short)"
close_tracking_issue "Every patch applies on upstream $short: see #$pr."
if [ "${CHECKS_DISPATCH:-0}" = 1 ]; then
  # a push or PR made with the GITHUB_TOKEN starts no workflow; a workflow_dispatch does
  for flow in pr-check.yml gpu.yml; do
    $GH workflow run "$flow" --ref "$branch"
  done
fi
