#!/usr/bin/env bash
# The sha of the upstream branch's tip, for the mirror cache's key: a cache entry per upstream
# state, so a run saves only when the upstream moved and restores the newest entry otherwise
# (restore-keys). Prints the sha and writes sha=<sha> to $GITHUB_OUTPUT when set.
#
# Environment: REBASECTL_DIR (default .), REBASECTL_UPSTREAM (else series.yaml's url).
# Exit: 0 (sha=unknown when the upstream cannot be reached: the job then restores the newest
# entry and rebasectl reports the real error itself).
set -uo pipefail
DIR=${REBASECTL_DIR:-.}
read -r url branch < <(python3 -c 'import sys, yaml; u = yaml.safe_load(open(sys.argv[1]))["upstream"]; print(u.get("url") or "-", u.get("branch") or "main")' "$DIR/series.yaml")
url=${REBASECTL_UPSTREAM:-$url}
sha=$(git ls-remote "$url" "refs/heads/$branch" 2>/dev/null | cut -f1)
sha=${sha:-unknown}
echo "$sha"
if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "sha=$sha" >> "$GITHUB_OUTPUT"; fi
