#!/usr/bin/env bash
# The pull-request check, runnable locally: the series is valid, applies exactly on its pinned
# base, and re-exporting it would change no byte of patches/ or series.yaml.
#
# Environment: REBASECTL (default `rebasectl`), REBASECTL_DIR (default .), REBASECTL_UPSTREAM.
# Exit: 0 ok, 1 the series needs attention (does not apply, or is not canonical), 2 bad input.
set -euo pipefail
REBASECTL=${REBASECTL:-rebasectl}
DIR=${REBASECTL_DIR:-.}
up=()
[ -n "${REBASECTL_UPSTREAM:-}" ] && up=(--upstream "$REBASECTL_UPSTREAM")

$REBASECTL -C "$DIR" check --apply "${up[@]}"

# Belt and braces: a real apply + export in a scratch copy must reproduce the files byte for byte.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$DIR/series.yaml" "$DIR/patches" "$scratch/"
if [ -d "$DIR/.rebasectl/upstream.git" ]; then
  mkdir -p "$scratch/.rebasectl"
  git clone -q --mirror "$DIR/.rebasectl/upstream.git" "$scratch/.rebasectl/upstream.git"
fi
$REBASECTL -C "$scratch" apply "${up[@]}" > /dev/null
$REBASECTL -C "$scratch" export > /dev/null
if ! diff -r "$DIR/patches" "$scratch/patches" > "$scratch/export.diff" \
   || ! cmp -s "$DIR/series.yaml" "$scratch/series.yaml"; then
  echo "::error::a re-export changes the series; run \`rebasectl apply && rebasectl export\` and commit the result"
  cat "$scratch/export.diff"
  diff "$DIR/series.yaml" "$scratch/series.yaml" || true
  exit 1
fi
echo "series is valid, applies on its base, and re-exports byte-identically"
