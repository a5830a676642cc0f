#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Checks vm_known_filter (lib.sh), which lets run-suite.sh's dmesg scan allow
# a report of known-reports.list, against testdata/nvme-pci-6.1-lockdep.txt
# (the report as the debug kernel's ns-removal case logged it, 2026-12-03):
#   - on 6.1 it becomes one "allowed known report" line, the lines around it kept;
#   - on 7.2 (not the list's kernel) it stays whole;
#   - with a kvblk frame in its stack it stays whole;
#   - with another chain it stays whole.
# Run by ctest (vm_known_reports); needs only bash, awk and sed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
list=$here/known-reports.list log=$here/testdata/nvme-pci-6.1-lockdep.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {	# name expected-allowed-lines expected-report-lines krel log
	local out allowed report
	out=$(vm_known_filter "$4" "$list" "$5")
	allowed=$(grep -c '^kvblk-vm: allowed known report nvme-pci-6.1-timeout-vs-reset$' <<<"$out" || true)
	report=$(grep -c 'possible circular locking dependency detected' <<<"$out" || true)
	if [ "$allowed" = "$2" ] && [ "$report" = "$3" ] &&
	   grep -q 'timeout, reset controller' <<<"$out" && grep -q 'default/read/poll queues' <<<"$out"; then
		echo "ok   $1"
	else
		echo "FAIL $1: $allowed allowed lines (want $2), $report report headers (want $3), or the lines around it lost"
		fails=$((fails + 1))
	fi
}
check "6.1 debug: allowed" 1 0 6.1.192-kvblk-debug "$log"
check "7.2: kept" 0 1 7.2.13+deb14-amd64 "$log"
sed 's/nvme_timeout.cold+0x454\/0x65d \[nvme\]/kvblk_cmd_end+0x10\/0x20 [kvblk]/' "$log" >"$tmp/kvblk-frame.txt"
check "6.1, a kvblk frame: kept" 0 1 6.1.192-kvblk-debug "$tmp/kvblk-frame.txt"
sed 's/&ctrl->namespaces_rwsem --> /\&ctrl->scan_lock --> /' "$log" >"$tmp/other-chain.txt"
check "6.1, another chain: kept" 0 1 6.1.192-kvblk-debug "$tmp/other-chain.txt"
[ "$fails" = 0 ] || exit 1
