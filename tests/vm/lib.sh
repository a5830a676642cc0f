# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# shellcheck disable=SC2034  # the VM_* settings are read by the scripts that source this
#
# Common settings and helpers of the kvblk VM harness. Sourced by the host-side
# scripts (mkinitramfs.sh, run-vm.sh, run-suite.sh); never run in the guest.
# Every knob is an environment variable named KVBLK_VM_*; see README.md.

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$VM_DIR/../.." && pwd)
VM_OUT=${KVBLK_VM_OUT:-$REPO/build/vm}
mkdir -p "$VM_OUT"
VM_OUT=$(cd "$VM_OUT" && pwd)
QEMU=${KVBLK_VM_QEMU:-qemu-system-x86_64}

vm_log() { printf 'vmtest: %s\n' "$*" >&2; }
vm_die() { vm_log "error: $*"; exit 2; }

# Prints the folder of the per-release kernel roots (tests/vm/kernels/mkroot.sh).
vm_kroots_dir() {
	local d=${KVBLK_VM_KROOTS:-$REPO/build/kroots}
	mkdir -p "$d"
	(cd "$d" && pwd)
}

# The guest's kernel: KVBLK_VM_KERNEL names where it comes from.
#   "" | host | 6.1 | bookworm   this machine's /boot and /lib/modules (default)
#   trixie | 6.12                 Debian trixie's kernel, in build/kroots/trixie
#   sid | 7.2                     Debian sid's kernel, in build/kroots/sid
#   debug                         Debian's 6.1 source with KASAN, lockdep, kmemleak...
#                                 (kernels/mkdebug.sh), in build/kroots/debug; the
#                                 userland is this machine's, as for host
# The numbers are the series each release carried when this was written; the
# root holds whatever its release ships (the suite prints the version).
# vm_kernel_select sets VM_KREL (host, trixie or sid) and VM_KROOT (the
# chroot holding the kernel; empty for the host); every path of the kernel
# below is "$VM_KROOT/boot/..." and "$VM_KROOT/lib/modules/...".
vm_kernel_select() {
	case ${KVBLK_VM_KERNEL:-host} in
	'' | host | 6.1 | bookworm) VM_KREL=host ;;
	trixie | 6.12) VM_KREL=trixie ;;
	sid | 7.2) VM_KREL=sid ;;
	debug) VM_KREL=debug ;;
	*) vm_die "KVBLK_VM_KERNEL='$KVBLK_VM_KERNEL': want host|6.1|bookworm, 6.12|trixie, 7.2|sid or debug" ;;
	esac
	VM_KROOT=
	[ $VM_KREL = host ] || VM_KROOT=$(vm_kroots_dir)/$VM_KREL
}

# Runs a command in the chroot ROOT with /proc mounted (in a private mount
# namespace: nothing stays mounted) and a clean environment.
# usage: vm_in_kroot ROOT COMMAND...
vm_in_kroot() {
	local root=$1
	shift
	env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 ${DEBIAN_FRONTEND:+DEBIAN_FRONTEND=$DEBIAN_FRONTEND} \
		unshare -m --propagation private sh -c \
		'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' "$root" "$@"
}

# Prints the kernel version the guest boots. A chroot kernel: the one in
# $VM_KROOT, whose root is made first when missing (kernels/mkroot.sh; the
# debug kernel: kernels/mkdebug.sh, which builds it the first time). The
# host's: $KVBLK_VM_KVER, else the newest /boot/vmlinuz-<ver> whose modules
# are installed in /lib/modules/<ver>.
vm_kernel_version() {
	local v best=
	[ -n "${VM_KREL:-}" ] || vm_kernel_select
	if [ "$VM_KREL" = debug ]; then
		"$VM_DIR/kernels/mkdebug.sh" || vm_die "no debug kernel"
		return
	fi
	if [ -n "$VM_KROOT" ]; then
		"$VM_DIR/kernels/mkroot.sh" "$VM_KREL" || vm_die "no $VM_KREL kernel root"
		return
	fi
	if [ -n "${KVBLK_VM_KVER:-}" ]; then
		[ -r "/boot/vmlinuz-$KVBLK_VM_KVER" ] || vm_die "no /boot/vmlinuz-$KVBLK_VM_KVER"
		echo "$KVBLK_VM_KVER"
		return
	fi
	for v in $(find /boot -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' 2>/dev/null |
		   sed 's/^vmlinuz-//' | sort -V); do
		[ -r "/boot/vmlinuz-$v" ] && [ -f "/lib/modules/$v/modules.dep" ] && best=$v
	done
	[ -n "$best" ] || vm_die "no /boot/vmlinuz-* with modules in /lib/modules (run: make deps-vm)"
	echo "$best"
}

# Prints the kernel file QEMU boots for KVER. Default: the uncompressed ELF
# vmlinux extracted once from $VM_KROOT/boot/vmlinuz-KVER into $VM_OUT/kernel, which
# QEMU starts through its PVH entry point: under TCG this saves the ~6 s the
# guest spends decompressing an xz bzImage. KVBLK_VM_PVH=0, or a kernel
# without a PVH entry (CONFIG_PVH), boots the bzImage itself.
vm_kernel_image() {
	[ -n "${VM_KREL:-}" ] || vm_kernel_select
	local bz=$VM_KROOT/boot/vmlinuz-$1 out=$VM_OUT/kernel/vmlinux-$1 h off magic unz pvh=${KVBLK_VM_PVH:-1}
	# The debug kernel's PVH entry reset the guest at once (QEMU exited after
	# 0.6 s, no console output, on 2026-12-02): it boots its bzImage.
	[ "$VM_KREL" = debug ] && pvh=${KVBLK_VM_PVH:-0}
	[ "$pvh" != 0 ] || { echo "$bz"; return; }
	h=$(vm_hash "$bz" "$(stat -c '%s %Y' "$bz")")
	if [ -f "$out" ] && [ "$(cat "$out.hash" 2>/dev/null)" = "$h" ]; then
		echo "$out"
		return
	fi
	rm -f "$out" "$out.hash"
	if [ -f "$out.nopvh" ] && [ "$(cat "$out.nopvh")" = "$h" ]; then
		echo "$bz"
		return
	fi
	mkdir -p "$VM_OUT/kernel"
	for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
		unz=${magic%%:*}
		command -v "$unz" >/dev/null || continue
		for off in $(LC_ALL=C grep -obUaP "${magic#*:}" "$bz" | head -n 3 | cut -d: -f1); do
			tail -c +$((off + 1)) "$bz" | "$unz" -dc >"$out.tmp.$$" 2>/dev/null || true
			# An ELF image with the PVH entry note (Xen note type 18).
			if [ "$(head -c 4 "$out.tmp.$$" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] &&
			   readelf -n "$out.tmp.$$" 2>/dev/null | grep -q 'note type: (0x00000012)'; then
				mv -f "$out.tmp.$$" "$out"
				echo "$h" >"$out.hash"
				echo "$out"
				return
			fi
		done
	done
	rm -f "$out.tmp.$$"
	echo "$h" >"$out.nopvh"
	vm_log "note: no PVH-bootable vmlinux in $bz; booting the bzImage (slower)"
	echo "$bz"
}

# Prints a short hash of the named files' contents and of any extra words.
vm_hash() {
	{
		local f
		for f in "$@"; do
			if [ -f "$f" ]; then sha256sum "$f"; else echo "$f"; fi
		done
	} | sha256sum | cut -c1-16
}

# Builds the pattern tool (kvblk-pattern.c) into $VM_OUT/bin when its sources
# changed; prints its path.
vm_pattern_tool() {
	local bin=$VM_OUT/bin/kvblk-pattern
	local h
	h=$(vm_hash "$VM_DIR/kvblk-pattern.c" "$VM_DIR/pattern.h")
	if [ ! -x "$bin" ] || [ "$(cat "$bin.hash" 2>/dev/null)" != "$h" ]; then
		mkdir -p "$VM_OUT/bin"
		${CC:-cc} -O2 -Wall -Wextra -std=gnu11 -o "$bin.tmp.$$" "$VM_DIR/kvblk-pattern.c" ||
			vm_die "cannot build kvblk-pattern"
		mv -f "$bin.tmp.$$" "$bin"
		echo "$h" >"$bin.hash"
	fi
	echo "$bin"
}

# Prints the path of a BYTES-long image holding the test pattern, made once and
# cached under $VM_OUT/images (guests open it with snapshot=on: never written).
vm_pattern_image() {
	local bytes=$1 tool img h
	tool=$(vm_pattern_tool)
	img=$VM_OUT/images/pattern-$bytes.img
	h=$(cat "$tool.hash")
	if [ ! -f "$img" ] || [ "$(cat "$img.hash" 2>/dev/null)" != "$h" ]; then
		mkdir -p "$VM_OUT/images"
		"$tool" fill "$img.tmp.$$" "$bytes" || vm_die "cannot write $img"
		mv -f "$img.tmp.$$" "$img"
		echo "$h" >"$img.hash"
	fi
	echo "$img"
}

# Converts 256M / 4K / 1G / 12345 to bytes.
vm_bytes() {
	local s=$1 n
	n=${s%[kKmMgG]}
	case $s in
	*[kK]) echo $((n << 10)) ;;
	*[mM]) echo $((n << 20)) ;;
	*[gG]) echo $((n << 30)) ;;
	*) echo $((n)) ;;
	esac
}

# Lists the variant names (tests/vm/variants/*.conf).
vm_variant_names() {
	local f
	for f in "$VM_DIR"/variants/*.conf; do
		basename "$f" .conf
	done
}

# Loads a variant: NAME or NAME:key=value[:key=value...] (keys: lba mdts qpairs
# size iommu bad append). A variant file may also set VM_NS_PROPS (extra nvme-ns
# properties, e.g. ms=8,mset=0,pi=0) and VM_NS_BYTES (the namespace capacity the
# guest sees, when it is not the image size), VM_QEMU_PRE (devices placed before
# the data controller, e.g. a PCIe switch), VM_NVME_BUS (the bus the data
# controller sits on), VM_QEMU_EXTRA, VM_NS2_OFFSET / VM_NS2_BYTES / VM_NS2_LBA:
# a second NVMe controller (serial kvblk1) with one namespace of VM_NS2_BYTES and
# VM_NS2_LBA-byte blocks (default VM_LBA) whose byte 0 is byte VM_NS2_OFFSET of
# the pattern image (the guest's KVBLK_TEST_DEVICE2), VM_SLICE_NS (N namespaces on
# another controller with serial kvblkx, nsid 1..N, each a distinct 1/N slice of
# the pattern image, read-only like it) and VM_SCRATCH_NS (size of one more, blank
# namespace there, nsid N+1, for file systems). Sets the VM_* variables below and
# VM_INSTANCE (a file-name-safe form of the spec).
vm_load_variant() {
	local spec=$1 name=${1%%:*} kv k v
	local conf=$VM_DIR/variants/$name.conf
	[ -f "$conf" ] || vm_die "unknown variant '$name' (have: $(vm_variant_names | tr '\n' ' '))"

	VM_DESC='' VM_LBA=4096 VM_MDTS=5 VM_QPAIRS=4 VM_DISK_SIZE=256M VM_IOMMU=0
	VM_BAD_BYTE_OFFSET='' VM_BAD_GROWS='' VM_APPEND='' VM_QEMU_EXTRA='' VM_NS_PROPS='' VM_NS_BYTES=''
	VM_QEMU_PRE='' VM_NVME_BUS='' VM_NS2_OFFSET='' VM_NS2_BYTES='' VM_NS2_LBA=''
	VM_SLICE_NS=0 VM_SCRATCH_NS=''

	# shellcheck source=/dev/null
	. "$conf"
	if [ "$spec" != "$name" ]; then
		local IFS=:
		for kv in ${spec#*:}; do
			k=${kv%%=*} v=${kv#*=}
			case $k in
			lba) VM_LBA=$v ;;
			mdts) VM_MDTS=$v ;;
			qpairs) VM_QPAIRS=$v ;;
			size) VM_DISK_SIZE=$v ;;
			iommu) VM_IOMMU=$v ;;
			bad) VM_BAD_BYTE_OFFSET=$(vm_bytes "$v") ;;
			grow) VM_BAD_GROWS=$v ;;
			append) VM_APPEND="$VM_APPEND $v" ;;
			*) vm_die "variant '$spec': unknown key '$k'" ;;
			esac
		done
	fi
	VM_VARIANT=$spec
	VM_NAME=$name
	VM_INSTANCE=$(printf '%s' "$spec" | tr -c 'A-Za-z0-9._=-' '_')
	VM_DISK_BYTES=$(vm_bytes "$VM_DISK_SIZE")
	VM_MAX_CMD_BYTES=$((4096 << VM_MDTS))
	case $VM_LBA in 512 | 4096) ;; *) vm_die "variant '$spec': lba must be 512 or 4096" ;; esac
	if [ -n "$VM_NS2_BYTES" ]; then
		VM_NS2_OFFSET=$(vm_bytes "${VM_NS2_OFFSET:-0}") VM_NS2_BYTES=$(vm_bytes "$VM_NS2_BYTES")
		VM_NS2_LBA=${VM_NS2_LBA:-$VM_LBA}
		case $VM_NS2_LBA in 512 | 4096) ;; *) vm_die "variant '$spec': VM_NS2_LBA must be 512 or 4096" ;; esac
		if [ $((VM_NS2_OFFSET % VM_NS2_LBA)) -ne 0 ] || [ $((VM_NS2_BYTES % VM_NS2_LBA)) -ne 0 ] ||
		   [ $((VM_NS2_OFFSET + VM_NS2_BYTES)) -gt "$VM_DISK_BYTES" ]; then
			vm_die "variant '$spec': the second namespace ($VM_NS2_BYTES bytes at $VM_NS2_OFFSET) is not LBA-aligned inside the image"
		fi
	fi
	case $VM_BAD_GROWS in
	'') ;;
	write) [ -n "$VM_BAD_BYTE_OFFSET" ] || vm_die "variant '$spec': grow needs a bad LBA (bad=)" ;;
	*) vm_die "variant '$spec': grow must be 'write'" ;;
	esac
	if [ -n "$VM_BAD_BYTE_OFFSET" ]; then
		if [ $((VM_BAD_BYTE_OFFSET % VM_LBA)) -ne 0 ] ||
		   [ "$VM_BAD_BYTE_OFFSET" -ge "$VM_DISK_BYTES" ]; then
			vm_die "variant '$spec': bad offset $VM_BAD_BYTE_OFFSET is not an LBA inside the disk"
		fi
	fi
}

# Quotes a value for a POSIX shell (busybox ash and bash both read it).
vm_shquote() {
	local s=$1
	printf "'%s'" "${s//\'/\'\\\'\'}"
}

# vm_known_filter KREL LIST LOG: prints kernel log LOG with each report of
# LIST (tests/vm/known-reports.list; its header has the rules) that belongs
# to kernel release KREL, holds its chain and names no kvblk code replaced by
# one line "kvblk-vm: allowed known report NAME" (known-filter.awk, which
# guest-side case scripts run themselves: vm-ns-removal.sh).
vm_known_filter() {
	awk -F'\t' -v krel="$1" -f "$VM_DIR/known-filter.awk" "$2" "$3"
}

# The first line of a kernel report in a kernel log or a console.
VM_REPORT_RE='(BUG: |Oops|general protection|invalid opcode|int3: |Kernel panic|watchdog: |WARNING: CPU|rcu: INFO|INFO: task .* blocked)'

# vm_console_excerpt LOG: what the kernel log or console LOG of a guest that
# stopped says: its first kernel report (Oops, BUG, soft lockup, panic,
# WARNING, RCU stall, hung task) with the registers and call trace after it,
# at most 60 lines, then "[...]" and its last 8 lines; a log with no report:
# its last 30 lines. The first report is the cause; the last lines are often
# only the panic or the watchdog repeating itself. CR LF lines (a serial
# console's) come out as plain lines.
vm_console_excerpt() {
	[ -f "$1" ] || return 0
	awk -v re="$VM_REPORT_RE" '
		{ sub(/\r$/, "") }
		!from && $0 ~ re { from = NR }
		from && NR < from + 60 { print; shown = NR }
		{ tail[NR % 8] = $0 }
		END {
			if (!from)
				exit 1
			if (NR > shown)
				print "[...]"
			for (i = (NR - 7 > shown ? NR - 7 : shown + 1); i <= NR; i++)
				print tail[i % 8]
		}' "$1" || tail -n 30 "$1" | tr -d '\r'
}

# vm_report_outside_kvblk LOG: did the kernel log LOG of a case that stopped
# its guest stop on a report outside kvblk? True when LOG holds a kernel
# report and nothing from the first report on names kvblk code: no
# kvblk_*+0x.. function (a RIP or a stack frame) and no frame of a kvblk
# module ([kvblk], [kvblk_test_dmabuf], ...). A process name (kvblkctl,
# kvblk_device_tests), the "Modules linked in" line and a frame the unwinder
# marks unreliable ("? name+0x..": a stale return address left on the stack,
# such as a tracepoint probe's address after its registration) do not count.
# A log with no report (a case stuck without one) or no log: false.
vm_report_outside_kvblk() {
	[ -f "$1" ] || return 1
	awk -v re="$VM_REPORT_RE" '
		!from && $0 ~ re { from = NR }
		from && !/Modules linked in:/ && !/^(\[[ 0-9.]+\])? +\? / &&
		    (/\[kvblk[a-z0-9_]*\]/ || /(^|[^a-z0-9_])kvblk_[a-z0-9_]+\+0x/) { ours = 1 }
		END { exit (from && !ours) ? 0 : 1 }' "$1"
}
