#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the P2PDMA selftests (kvblk_p2pdma_test.c) on
# the p2p-switch and p2p-far variants (the runner loads kvblk.ko: NEEDS
# load:kvblk). Runs the program, and on p2p-far also checks that the kernel
# log names both devices of the refused pair: the p2pmem provider (its PCI
# address) and the NVMe controller.
# Exit: the program's (0 pass, 4 skip, else fail), or 1 on a missing message.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

bin=${KVBLK_P2PDMA_BIN:-build-selftests/kvblk/kvblk_p2pdma_test}
[ -x "$bin" ] || skip "$bin not built (make -C tests/selftests/kvblk)"

"$bin"
rc=$?

if [ $rc = 0 ] && [ "${KVBLK_VM_VARIANT_NAME:-}" = p2p-far ]; then
	msg=$(dmesg | grep 'kvblk: register: .*p2pdma memory of .* cannot be reached' | tail -n 1)
	ctrl=$(basename "$(readlink -f /sys/block/nvme*n1/device/device)")
	if [ -z "$msg" ]; then
		echo "FAIL: no kernel message for the refused P2PDMA pair" >&2
		rc=1
	elif [[ $msg != *"$ctrl"* ]] || ! [[ $msg =~ [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]/p2pmem ]]; then
		echo "FAIL: the message does not name both devices (NVMe $ctrl, the provider): $msg" >&2
		rc=1
	else
		echo "ok: refusal message: ${msg#*] }"
	fi
fi
exit $rc
