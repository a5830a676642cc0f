#!/bin/bash
# SPDX-License-Identifier: MIT
# In the guest (tests/vm/bench/p2p-bench.list, variant p2p-switch, a kernel with
# CONFIG_PCI_P2PDMA): the same store on the same namespace loaded three ways, legs
# alternating round by round, every byte verified by kvblk-bench:
#   kmod -> CMB    kvblk.ko DMA into the second controller's memory buffer (a PCI BAR
#                  published as p2pmem), registered as KVBLK_MEM_P2PDMA
#   kmod -> host   kvblk.ko into registered host memory
#   uring -> host  libkvblk's io_uring backend into host memory
# Settings: KVBLK_BENCH_OBJECTS (24), KVBLK_BENCH_OBJECT_MIB (1), KVBLK_BENCH_QD (32),
# KVBLK_BENCH_CMD (131072), KVBLK_BENCH_REPEAT (3). Output: p2p-table.txt and the JSON of
# every leg in $KVBLK_VM_CASE_DIR.
. "$(dirname "$0")/../cases/lib.sh"
set +e

objs=${KVBLK_BENCH_OBJECTS:-24}
obj_mib=${KVBLK_BENCH_OBJECT_MIB:-1}
qd=${KVBLK_BENCH_QD:-32}
cmd=${KVBLK_BENCH_CMD:-131072}
repeat=${KVBLK_BENCH_REPEAT:-3}
dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
out=${KVBLK_VM_CASE_DIR:?}
bench=${KVBLK_BENCH_BIN:-build/tools/kvblk-bench/kvblk-bench}
window_mib=$((objs * obj_mib))
export TMPDIR=/tmp

[ -x "$bench" ] || skip "$bench not built (make userspace)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
alloc=$(ls /sys/bus/pci/devices/*/p2pmem/allocate 2>/dev/null | head -n 1)
[ -n "$alloc" ] || skip "no p2pmem provider (a kernel with CONFIG_PCI_P2PDMA and the p2p-switch variant)"
insmod "$KVBLK_KO" max_cmd_bytes="$cmd" max_inflight="$qd" || fail "insmod $KVBLK_KO"
trap 'rmmod kvblk 2>/dev/null' EXIT

common=(--device "$dev" --i-know-this-overwrites -n "$objs" -s "$obj_mib" --qd "$qd"
	--cmd-size "$cmd" --batch-objects 8 --buffer-mib "$window_mib" --no-fio -q -o json)
legs=("kmod-cmb:kmod:p2pdma:$alloc" "kmod-host:kmod:host" "uring-host:uring:host")
for r in $(seq "$repeat"); do
	for leg in "${legs[@]}"; do
		name=${leg%%:*} rest=${leg#*:}
		backend=${rest%%:*} dest=${rest#*:}
		"$bench" "${common[@]}" --backends "$backend" --dest "$dest" \
			>"$out/$name-$r.json" 2>"$out/$name-$r.err"
		rc=$?
		echo "round $r $name: exit status $rc"
		[ $rc = 0 ] || { tail -n 5 "$out/$name-$r.err"; fail "$name failed"; }
	done
done

{
	echo "leg             GB/s  path     verified   (median of $repeat; $objs x $obj_mib MiB, QD $qd, $((cmd >> 10)) KiB commands)"
	for leg in "${legs[@]}"; do
		name=${leg%%:*}
		for r in $(seq "$repeat"); do
			jq -r '.results[0] | "\(.gbps) \(.path) \(.verified)"' "$out/$name-$r.json"
		done | sort -g | awk -v n="$name" -v m=$(((repeat + 1) / 2)) \
			'NR == m { printf "%-12s %7.3f  %-7s  %s\n", n, $1, $2, $3 }'
	done
} | tee "$out/p2p-table.txt"
grep -q ' false$' "$out/p2p-table.txt" && fail "a leg did not verify"
grep -q '^kmod-cmb .* p2p ' "$out/p2p-table.txt" || fail "kmod -> CMB did not report the p2p path"
exit 0
