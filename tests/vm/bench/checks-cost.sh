#!/bin/bash
# SPDX-License-Identifier: MIT
# usage: tests/vm/bench/checks-cost.sh REV
# Builds kvblk.ko of REV (a commit before the per-call checks, e.g. affa499) into
# build/cost-old for the guest's kernel, then runs tests/vm/bench/checks-cost.list:
# kmod_cost with that build and this tree's, alternated, in one guest.
# The host kernel (6.1) only.
set -euo pipefail
cd "$(dirname "$0")/../../.."
rev=${1:?usage: checks-cost.sh REV (a commit before the per-call checks)}
rm -rf build/cost-old && mkdir -p build/cost-old
git archive "$rev" kmod include | tar -x -C build/cost-old
make -C build/cost-old/kmod ${KVBLK_VM_KVER:+KVER=$KVBLK_VM_KVER} >/dev/null
make -C tests/kmod-smoke kmod_cost >/dev/null
exec tests/vm/run-suite.sh --manifest tests/vm/bench/checks-cost.list --variants lba4k
