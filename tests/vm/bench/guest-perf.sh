# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# guest-perf.sh - perf of the guest's own kernel for the benches' profiles
# (sourced by guest-cpu-bench.sh inside the guest).
#
# perf of another kernel than the guest's records nothing it can read back:
# the host's perf 6.1 in the 7.2 guest wrote files whose "data size field is
# 0" (2026-12-06, with and without --no-buildid). Each kernel root holds its
# release's linux-perf (tests/vm/kernels/mkroot.sh), so in a guest of a root's
# kernel perf runs in that root: /proc, /sys and /dev are mounted in it, the
# run folder on its /mnt and a tmpfs on its /tmp (perf's HOME; the root itself
# is the host's, read-only). There the host's binaries and libraries keep
# their symbols to themselves: their samples show as addresses (perf report
# --symfs over the guest's root resolved none of them either, 2026-12-06);
# the kernel's and modules' symbols are all there.
# perf.data goes to a tmpfs, never to the 9p run folder: in the 7.2 guest perf
# record's files there, its own perf's too, ended with a "data size field" of
# 0 (2026-12-06).
#
# usage: guest_perf_setup OUT    then    guest_perf ARGS...
#   guest_perf_setup picks the perf and sets perf_out, the path under which
#   perf sees the folder OUT (OUT itself, or /mnt in the root), and perf_data
#   and perf_data_here, a tmpfs folder for perf.data files as perf and as the
#   caller see it. Every file perf reads or writes must be named through
#   these, and every file its workload reads must exist in the root too
#   (/sys, /proc). It prints why and returns 1 where this guest has no perf
#   of its kernel.
#   guest_perf_teardown unmounts what guest_perf_setup mounted.

# Set by guest_perf_setup for the sourcing script.
# shellcheck disable=SC2034
perf_out='' perf_data='' perf_data_here=''
guest_perf_root=
guest_perf_mounts=()

# major.minor of a version string ("7.2.13+deb14-amd64" -> 7.2)
guest_perf_mm() { awk '{ split($1, v, "."); print v[1] "." v[2] }' <<<"$1"; }

guest_perf_setup() {
	local out=$1 kr=${KVBLK_VM_KROOT:-} want have m
	want=$(guest_perf_mm "$(uname -r)")
	have=$(perf --version 2>/dev/null | awk '{ print $3 }')
	if [ -n "$have" ] && [ "$(guest_perf_mm "$have")" = "$want" ]; then
		guest_perf_root='' perf_out=$out
		perf_data=$(mktemp -d /dev/shm/kvblk-perf.XXXXXX) perf_data_here=$perf_data
		return 0
	fi
	if [ -z "$kr" ] || [ ! -x "$kr/usr/bin/perf" ]; then
		echo "no perf of kernel $want in this guest: the host's is ${have:-missing}, and ${kr:-no kernel root} has no usr/bin/perf (tests/vm/kernels/mkroot.sh installs linux-perf)"
		return 1
	fi
	for m in proc sys dev tmp mnt; do
		mountpoint -q "$kr/$m" && continue
		case $m in
		proc) mount -t proc proc "$kr/proc" ;;
		sys) mount -t sysfs sysfs "$kr/sys" ;;
		dev) mount -o bind /dev "$kr/dev" ;;
		tmp) mount -t tmpfs -o mode=1777 tmpfs "$kr/tmp" ;;
		mnt) mount -o bind "$out" "$kr/mnt" ;;
		esac || { echo "no perf: cannot mount $m in $kr"; guest_perf_teardown; return 1; }
		guest_perf_mounts+=("$kr/$m")
	done
	guest_perf_root=$kr perf_out=/mnt perf_data=/tmp perf_data_here=$kr/tmp
	return 0
}

guest_perf() {
	if [ -z "$guest_perf_root" ]; then
		perf "$@"
	else
		env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 \
			chroot "$guest_perf_root" perf "$@"
	fi
}

guest_perf_teardown() {
	local i

	for ((i = ${#guest_perf_mounts[@]} - 1; i >= 0; i--)); do
		umount "${guest_perf_mounts[i]}" 2>/dev/null || true
	done
	[ -z "$guest_perf_root" ] && [ -n "${perf_data:-}" ] && rm -rf "$perf_data"
	guest_perf_mounts=() guest_perf_root=''
}
