#!/usr/bin/env bash
# Executable docs (docs/docs-test.md): runs the marked shell blocks of README.md and docs/deploy.md,
# docs/api.md, docs/bench.md and docs/serve.md against build/dualpath as cram tests, and checks
# every `--flag` of a `dualpath` command they write against its --help and every path they name.
#   scripts/docs-test.sh                       every document (CI: after scripts/test.sh's build)
#   scripts/docs-test.sh docs/deploy.md        one document
#   scripts/docs-test.sh --static              only the markers, flags and paths
#   DOCS_TEST_NO_BUILD=1 scripts/docs-test.sh  ./scripts/run.sh becomes ./build/dualpath (no build)
# The last line of its output is `N passed, N failed`; the exit status is 1 when N failed > 0.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
exec /usr/bin/python3 scripts/docs_test.py "$@"
