#!/usr/bin/env bash
# The main job: installs what is missing, builds uct-tm, and runs it.
# Until the shared-memory transport lands, the main job is the software tag
# matcher benchmark: cost per matched message against queue depth, for exact
# tags, four mask classes mixed, unexpected-first and masked probes.
# Idempotent: a second run rebuilds only what changed.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
cd "$src"

contrib/deps.sh
contrib/build.sh "$build"
BENCH_NO_BUILD=1 contrib/bench_matcher.sh "$build" "$@"
