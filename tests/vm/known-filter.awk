# SPDX-License-Identifier: MIT
# Kernel log filter for reports of tests/vm/known-reports.list (its header has
# the rules). Usage:
#   awk -F'\t' -v krel=KERNEL-RELEASE -f known-filter.awk known-reports.list LOG
# prints LOG with each report that belongs to krel, holds its chain and names
# no kvblk code replaced by one line "kvblk-vm: allowed known report NAME".
# Run by tests/vm/lib.sh (vm_known_filter, the host's dmesg scan) and by case
# scripts in the guest that check the kernel log themselves.
FNR == NR {
	if ($0 !~ /^#/ && NF >= 4 && krel ~ $2) {
		n++; kname[n] = $1; khead[n] = $3; kchain[n] = $4
	}
	next
}
function flush(   i, ok) {
	ok = 0
	for (i = 1; i <= n; i++)
		if (blk ~ khead[i] && index(blk, kchain[i]) && blk !~ /\[kvblk|kvblk_/) {
			ok = i; break
		}
	if (ok)
		print "kvblk-vm: allowed known report " kname[ok]
	else
		printf "%s", blk
	blk = ""; inblk = 0
}
{
	if (!inblk)
		for (i = 1; i <= n; i++)
			if ($0 ~ khead[i]) { inblk = 1; break }
	if (!inblk) { print; next }
	blk = blk $0 "\n"
	if ($0 ~ /<\/TASK>/) flush()
}
END { if (inblk) flush() }
