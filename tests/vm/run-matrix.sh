#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The kernel matrix: runs the VM suite (run-suite.sh) once per kernel, one
# leg after the other, and prints each leg's start, end and seconds, and a
# closing table. A chroot kernel's root is made when missing
# (kernels/mkroot.sh): in the background from the start (the downloads and
# unpacking overlap the earlier legs; KVBLK_VM_MATRIX_PREFETCH=0: no), and a
# leg waits for its root; that wait is printed apart from the leg's time.
#
# usage: run-matrix.sh [--cases REGEX] [--variants LIST] [KERNEL...]
#   KERNEL   as KVBLK_VM_KERNEL (6.1|host|bookworm, 6.12|trixie, 7.2|sid);
#            default $KVBLK_VM_KERNELS, else "6.1 6.12 7.2"
#   --cases, --variants  passed to every leg (they override the subset below)
# Legs on a chroot kernel run every variant but those in
# $KVBLK_VM_MATRIX_SKIP (default "lba512 mdts-small") unless --variants is
# given, and every case but those matching the ERE $KVBLK_VM_MATRIX_SKIP_CASES
# (default "^(kvblkctl|fuzz)$") unless --cases is given (see README.md, "Kernel
# matrix"); the host's kernel runs everything. The middle kernel, 6.12, runs only
# the variants in $KVBLK_VM_MATRIX_MID_VARIANTS (default lba4k,iommu,stripe4,meta;
# empty: the subset above) unless --variants is given; see tests/vm/README.md, "Kernel
# matrix", for why those.
# Exit status: 0 when every leg passed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The whole script is one block, read before it runs: editing this file
# while a suite runs does not change what that suite does.
{

cases='' variants=''
while [ $# -gt 0 ]; do
	case $1 in
	--cases) cases=$2; shift 2 ;;
	--variants) variants=$2; shift 2 ;;
	-h | --help) sed -n '3,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	-*) vm_die "usage: run-matrix.sh [--cases REGEX] [--variants LIST] [KERNEL...]" ;;
	*) break ;;
	esac
done
# shellcheck disable=SC2206
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || read -ra kernels <<<"${KVBLK_VM_KERNELS:-6.1 6.12 7.2}"
skip=" ${KVBLK_VM_MATRIX_SKIP-lba512 mdts-small} "
skip_cases=${KVBLK_VM_MATRIX_SKIP_CASES-^(kvblkctl|fuzz)\$}
mid_variants=${KVBLK_VM_MATRIX_MID_VARIANTS-lba4k,iommu,stripe4,meta}
subset=
for v in $(vm_variant_names); do
	[[ $skip == *" $v "* ]] || subset+=${subset:+,}$v
done

now() { date -u +%H:%M:%SZ; }
table=()
failed=()
t_all=$SECONDS

# Roots missing now are made in the background, one after the other.
declare -A prefetch_log=()
if [ "${KVBLK_VM_MATRIX_PREFETCH:-1}" = 1 ]; then
	todo=()
	for k in "${kernels[@]}"; do
		KVBLK_VM_KERNEL=$k vm_kernel_select
		[ -n "$VM_KROOT" ] && [ ! -f "$VM_KROOT/.kvblk-kroot" ] || continue
		[[ " ${todo[*]} " == *" $VM_KREL "* ]] || todo+=("$VM_KREL")
	done
	if [ ${#todo[@]} -gt 0 ]; then
		for r in "${todo[@]}"; do
			prefetch_log[$r]=$VM_OUT/mkroot-$r.log
		done
		echo "== matrix: making kernel roots ${todo[*]} in the background ($(now)); logs: $VM_OUT/mkroot-*.log"
		(
			for r in "${todo[@]}"; do
				"$VM_DIR/kernels/mkroot.sh" "$r" >"${prefetch_log[$r]}" 2>&1 || true
			done
		) &
		# Let the first mkroot.sh take its root's lock before any leg looks.
		sleep 1
	fi
fi
for k in "${kernels[@]}"; do
	(KVBLK_VM_KERNEL=$k vm_kernel_select) || exit 2
	KVBLK_VM_KERNEL=$k vm_kernel_select	# VM_KREL, VM_KROOT
	args=()
	[ -n "$cases" ] && args+=(--cases "$cases")
	if [ -n "$variants" ]; then
		args+=(--variants "$variants")
	elif [ "$VM_KREL" = trixie ] && [ -n "$mid_variants" ]; then
		args+=(--variants "$mid_variants")
	elif [ -n "$VM_KROOT" ] && [ -n "$subset" ]; then
		args+=(--variants "$subset")
	fi
	if [ -z "$cases" ] && [ -n "$VM_KROOT" ] && [ -n "$skip_cases" ]; then
		args+=(--skip-cases "$skip_cases")
	fi

	root_s=-
	if [ -n "$VM_KROOT" ]; then
		t0=$SECONDS
		echo "== matrix: kernel $k: root $VM_KROOT ($(now))"
		kver=$("$VM_DIR/kernels/mkroot.sh" "$VM_KREL") || {
			failed+=("$k")
			table+=("$k	?	-	-	-	no kernel root")
			continue
		}
		root_s=$((SECONDS - t0))
		if [ -n "${prefetch_log[$VM_KREL]:-}" ]; then
			sed 's/^/   /' "${prefetch_log[$VM_KREL]}"
		fi
		echo "== matrix: kernel $k: root ready after $root_s s"
	else
		kver=$(KVBLK_VM_KERNEL=$k vm_kernel_version)
	fi

	echo "== matrix: leg $k ($kver) start $(now)${args[*]:+, ${args[*]}}"
	t0=$SECONDS
	rc=0
	out=$(mktemp)
	set +e
	KVBLK_VM_KERNEL=$k "$VM_DIR/run-suite.sh" "${args[@]}" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	set -e
	secs=$((SECONDS - t0))
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1 || true)
	# Time spent waiting for other suites' VMs on this machine (not CI's case).
	waited=$(awk '{ for (i = 1; i < NF; i++) if ($i == "waiting" && $(i + 2) == "s") w += $(i + 1) }
		END { printf "%d", w }' "$out")
	# Seconds the leg's VMs ran ("VM: S s wall" per variant).
	vm_s=$(awk '$1 == "VM:" && $3 == "s" { v += $2 } END { printf "%d", v }' "$out")
	rm -f "$out"
	[ -n "$summary" ] || summary="no result (rc $rc)"
	[ "$rc" = 0 ] || failed+=("$k")
	secs="$secs s"
	[ "$waited" -gt 0 ] && secs="$secs ($waited s waiting for other VMs)"
	echo "== matrix: leg $k ($kver) end $(now): $secs, VMs $vm_s s, $summary"
	table+=("$k	$kver	$root_s	$secs	$vm_s	$summary")
done

echo "== matrix: $(( SECONDS - t_all )) s in all"
{
	printf 'kernel\tversion\troot wait s\tleg\tVMs s\tresult\n'
	printf '%s\n' "${table[@]}"
} | awk -F'\t' '{ printf "   %-7s %-22s %-12s %-30s %-6s %s\n", $1, $2, $3, $4, $5, $6 }'
if [ ${#failed[@]} -gt 0 ]; then
	echo "== matrix: FAILED on ${failed[*]}"
	exit 1
fi
echo "== matrix: all legs passed"
exit
}
