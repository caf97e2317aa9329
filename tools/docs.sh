#!/usr/bin/env bash
# Build the documentation site strictly and offline: `bash tools/docs.sh [OUT]` (default site/).
# Strict: a broken link or anchor, a page missing from the nav or a generated page that fails is an error.
# tools/env.sh (sourced) makes .venv with the test extra, which holds the docs extra.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/env.sh
out="${1:-site}"
# mkdocs 1.6 and Material print an advertisement about their successors on every build; the build is pinned
export NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true
.venv/bin/python -m mkdocs build --strict --quiet --site-dir "$out"
echo "tools/docs.sh: the site is in $out/ (open $out/index.html; it needs no network)"
