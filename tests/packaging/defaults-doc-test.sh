#!/bin/bash
# SPDX-License-Identifier: MIT
#
# docs/defaults.md's table holds exactly the library's defaults: every row that defaults_doc
# prints (from kvblk_get_default_info()) is in the table as it is, in order, and the table has
# no row for a KVBLK_* variable of the library that is not among them. Run with the
# environment's KVBLK_* variables cleared (the rows print the built-in values).
# usage: defaults-doc-test.sh DEFAULTS_DOC_BIN DOC
set -euo pipefail
bin=${1:?usage: defaults-doc-test.sh BIN DOC}
doc=${2:?usage: defaults-doc-test.sh BIN DOC}
for v in $(env | sed -n 's/^\(KVBLK_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
want=$("$bin")
[ -n "$want" ] || { echo "FAIL: $bin printed no rows" >&2; exit 1; }
# The library's rows as the document has them, in the document's order.
vars=$(sed -n 's/^| `\(KVBLK_[A-Z0-9_]*\)` |.*/\1/p' <<<"$want")
got=$(grep -F -f <(sed 's/.*/| `&` |/' <<<"$vars") "$doc" || true)
if [ "$want" != "$got" ]; then
	echo "FAIL: $doc's rows of the defaults differ from the library's table (- library, + document):" >&2
	diff -u <(echo "$want") <(echo "$got") >&2 || true
	echo "(print the rows with: $bin)" >&2
	exit 1
fi
echo "defaults-doc-test: $(wc -l <<<"$want") defaults, $doc agrees"
