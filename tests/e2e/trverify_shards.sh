#!/usr/bin/env bash
# --shard K/N: for N = 1, 2, 3 the shards are disjoint and together hold the same rules as one run
# (--list-rules on rules/), and give the same verdicts and JSON, times aside (verified on PATHS).
#   trverify_shards.sh TRVERIFY PYTHON3 REPORTS_PY OUTDIR PATH...
set -u
tool=$1 py=$2 check=$3 out=$4
shift 4
rm -rf "$out" && mkdir -p "$out" || exit 1
"$tool" --list-rules rules/ >"$out/list" || exit 1
"$tool" --check --json --jobs 2 "$@" >"$out/all.json" || { echo "FAIL: the whole run"; exit 1; }
for n in 1 2 3; do
  lists=() runs=()
  for k in $(seq "$n"); do
    "$tool" --list-rules --shard "$k/$n" rules/ >"$out/list.$k.$n" || exit 1
    "$tool" --check --json --jobs 2 --shard "$k/$n" "$@" >"$out/run.$k.$n.json" || { echo "FAIL: shard $k/$n"; exit 1; }
    lists+=("$out/list.$k.$n") runs+=("$out/run.$k.$n.json")
  done
  "$py" "$check" list-union "$out/list" "${lists[@]}" || exit 1
  "$py" "$check" union "$out/all.json" "${runs[@]}" || exit 1
done
