#!/usr/bin/env bash
# crash_stress.sh - issue 7's crash test at stress size: SIGKILL at random
# moments of `strata train` runs (up to three kills a trial), resume after
# each, and the losses and weights compared bit for bit with runs that were
# never interrupted. The same script as the CI test (tests/cli/crash_resume.sh,
# a few trials), with more trials.
#
#   bench/crash_stress.sh [STRATA] [TRIALS]     defaults: build/strata 60
set -euo pipefail
STRATA=${1:-build/strata}
TRIALS=${2:-60}
cd "$(dirname "$0")/.."
TRIALS=$TRIALS bash tests/cli/crash_resume.sh "$STRATA" .
