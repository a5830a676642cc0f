#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kvblkctl store on files of this machine: create (classes as asked, a second create refused
# unless --force), ls (every key put, with its length), check (clean; a flipped object bit
# found with --data, exit 1; --repair drops exactly that object), info and stats while a
# process serves the store (its pid, counters equal to what it did), usage errors.
# usage: store-test.sh KVBLKCTL KVSTORE_FILL
set -uo pipefail
K=${1:?usage: store-test.sh KVBLKCTL KVSTORE_FILL}
F=${2:?usage: store-test.sh KVBLKCTL KVSTORE_FILL}
T=$(mktemp -d /var/tmp/kvblkctl-store.XXXXXX)
trap 'exec 3>&- 2>/dev/null; rm -rf "$T"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { fails=$((fails + 1)); echo "FAIL: $*" >&2; }
check() { if [ "$2" = "$3" ]; then ok "$1 = $2"; else bad "$1: got '$2', want '$3'"; fi; }
jq_check() { check "$1" "$(jq -r "$3" <<<"$2" 2>&1)" "$4"; }

A=$T/a
B=$T/b
j=$("$K" -o json store create "$A" "$B" --class 64K:1 --class 1M:2 --file-size 48M)
jq_check "create classes" "$j" '[.classes[].slot_bytes] | join(",")' "65536,1048576"
jq_check "create drives" "$j" '.drives | length' 2
err=$("$K" store create "$A" --class 64K --file-size 48M 2>&1); rc=$?
check "create over a store refused" "$rc" 1
grep -q 'already holds a kvblk store' <<<"$err" && ok "create refusal says why" || bad "create refusal: $err"

"$F" 20 30000 "$A" "$B" || bad "fill"
j=$("$K" -o json store ls "$B" "$A")
jq_check "ls keys" "$j" '[.keys[].key] | sort | join(",")' \
	"$(for i in $(seq 0 19); do echo key-$i; done | sort | paste -sd,)"
jq_check "ls lengths" "$j" '[.keys[].length] | unique | join(",")' 30000
jq_check "ls drives used" "$j" '[.keys[].drive] | unique | join(",")' "0,1"
j=$("$K" -o json store info "$A" "$B")
jq_check "info objects" "$j" .objects 20
jq_check "info bytes" "$j" .bytes_stored 600000
jq_check "info class objects" "$j" '[.classes[].objects] | join(",")' "20,0"

j=$("$K" -o json store check "$A" "$B" --data); rc=$?
check "check clean exit" "$rc" 0
jq_check "check clean" "$j" '"\(.objects) \(.bad_objects) \(.bytes_checked) \(.clean)"' "20 0 600000 true"

# Flip one bit of key-3's object, wherever the store put it.
read -r drv slot_off < <("$K" -o json store ls "$A" "$B" | jq -r '.keys[] | select(.key == "key-3") | "\(.drive) \(.gen)"')
path=$A; [ "$drv" = 1 ] && path=$B
off=$(od -An -t u8 -j 152 -N 8 "$path" | tr -d ' ')   # class 0's offset (superblock, section 3)
# key-3's bytes start with (3*31 + j) & 0xff; find that slot by its first 16 bytes.
want=$(printf '%02x' $(for j in $(seq 0 15); do echo $(((3 * 31 + j) & 255)); done) | tr -d '\n')
found=
for s in $(seq 0 700); do
	got=$(od -An -t x1 -j $((off + s * 65536)) -N 16 "$path" | tr -d ' \n')
	if [ "$got" = "$want" ]; then found=$((off + s * 65536)); break; fi
done
[ -n "$found" ] && ok "found key-3's slot" || bad "key-3's slot not found"
b=$(od -An -t u1 -j $((found + 777)) -N 1 "$path" | tr -d ' ')
printf "$(printf '\\x%02x' $((b ^ 16)))" | dd of="$path" bs=1 seek=$((found + 777)) conv=notrunc status=none

j=$("$K" -o json store check "$A" "$B"); rc=$?
check "check without --data (index only) exit" "$rc" 0
j=$("$K" -o json store check "$A" "$B" --data); rc=$?
check "check --data finds it, exit" "$rc" 1
jq_check "check --data bad" "$j" .bad_objects 1
jq_check "check --data names CRC32C" "$j" '.first_problem | test("CRC32C")' true
j=$("$K" -o json store check "$A" "$B" --repair); rc=$?
check "check --repair exit" "$rc" 0
jq_check "check --repair dropped" "$j" .repaired 1
j=$("$K" -o json store ls "$A" "$B")
jq_check "ls after repair" "$j" '[.keys[].key] | select(index("key-3") == null) | length' 19
j=$("$K" -o json store check "$A" "$B" --data); rc=$?
check "check after repair exit" "$rc" 0

# Live: a process serving the store; stats and info read its counters.
exec 3> >("$F" --hold 5 4096 "$A" "$B" >"$T/hold.out")
for i in $(seq 50); do grep -q ready "$T/hold.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$T/hold.out" && ok "holder ready" || bad "holder never got ready"
j=$("$K" -o json store stats "$A")
jq_check "stats puts, gets, hits" "$j" '"\(.counters.puts) \(.counters.gets) \(.counters.hits)"' "5 5 5"
jq_check "stats bytes" "$j" '"\(.counters.bytes_written) \(.counters.bytes_read)"' "20480 20480"
jq_check "stats drives" "$j" '.drives | length' 2
jq_check "stats drive bytes add up" "$j" '[.drives[].bytes_written] | add' 20480
jq_check "info of a served store is live" "$("$K" -o json store info "$A" "$B")" '.pid > 0' true
err=$("$K" store ls "$A" "$B" 2>&1); rc=$?
check "ls of a served store exit" "$rc" 1
grep -q 'open in another kvblk store' <<<"$err" && ok "ls refusal says why" || bad "ls refusal: $err"
exec 3>&-
sleep 0.5
err=$("$K" store stats "$A" 2>&1); rc=$?
check "stats after the holder closed" "$rc" 1
grep -q 'no process has store' <<<"$err" && ok "stats says no process" || bad "stats: $err"

# Usage.
err=$("$K" store create "$T/c" --class 4X --file-size 48M 2>&1); rc=$?
check "bad --class exit" "$rc" 1
grep -q -- '--class 4X' <<<"$err" && ok "bad --class named" || bad "bad --class: $err"
err=$("$K" store info "$T/nothing" 2>&1); rc=$?
check "info of a missing path exit" "$rc" 1
err=$("$K" store info /etc/hostname 2>&1); rc=$?
grep -q 'not a kvblk store' <<<"$err" && ok "info of a foreign file" || bad "info foreign: $err"
[ $fails -eq 0 ] || { echo "$fails failures" >&2; exit 1; }
echo "all store checks passed"
