#!/bin/sh
# Renders one man page with pandoc from its markdown source (no TeX math:
# a `$` is an nginx variable's, not a formula), where a line
# "@GENERATED@" is replaced by what a command prints: the program's own
# --manual-markdown (its options, from the table its parser uses) or a
# README shifted one heading level up (config/README.md for the policy).
#   render.sh OUT SOURCE.md TITLE SECTION VERSION -- COMMAND...
#   render.sh OUT SOURCE.md TITLE SECTION VERSION --readme FILE
set -eu
out="$1" source="$2" title="$3" section="$4" version="$5"
shift 5
fragment="$(mktemp)"
trap 'rm -f "$fragment" "$fragment.md"' EXIT
case "$1" in
  --) shift; "$@" >"$fragment" ;;
  # The README's own title goes (the man page has NAME); ## becomes #.
  --readme) sed -e '1{/^# /d}' -e 's/^#\(#*\) /\1 /' "$2" >"$fragment" ;;
  *) echo "render.sh: want -- COMMAND or --readme FILE" >&2; exit 2 ;;
esac
[ -s "$fragment" ] || { echo "render.sh: the fragment for $source is empty" >&2; exit 1; }
awk -v f="$fragment" '$0 == "@GENERATED@" { while ((getline l < f) > 0) print l; next } { print }' "$source" >"$fragment.md"
pandoc --standalone --from markdown-smart-tex_math_dollars --to man \
  --metadata title="$title" --metadata section="$section" \
  --metadata header="sluice $version" --metadata footer="sluice $version" \
  --metadata date="" "$fragment.md" --output "$out"
