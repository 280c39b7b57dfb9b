#!/usr/bin/env bash
# Interrupting a run of rules/ leaves well-formed reports of what was decided (docs/cli.md):
#  1. SIGTERM after 3 s, --json plus --junit and --sarif files: exit 143;
#  2. SIGINT once some rules are printed, --jsonl plus --junit: exit 130, the JSONL rules in
#     file-then-line order.
# Every report is checked by trverify_reports.py: structure, and decided + not run = all rules.
#   trverify_interrupt.sh TRVERIFY PYTHON3 REPORTS_PY OUTDIR
set -u
tool=$1 py=$2 check=$3 out=$4
rm -rf "$out" && mkdir -p "$out" || exit 1
"$tool" --list-rules rules/ >"$out/list" || { echo "FAIL: --list-rules"; exit 1; }
total=$(wc -l <"$out/list")

# A background job of a non-interactive shell starts with SIGINT ignored; `trap - INT` undoes that.
( trap - INT; exec "$tool" --check --json --junit "$out/a.xml" --sarif "$out/a.sarif" --jobs 2 rules/ \
    >"$out/a.json" 2>"$out/a.err" ) &
pid=$!
sleep 3
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 143 ] || { echo "FAIL: exit $rc after SIGTERM, expected 143"; cat "$out/a.err"; exit 1; }
"$py" "$check" reports --json "$out/a.json" --junit "$out/a.xml" --sarif "$out/a.sarif" \
    --total "$total" --interrupted SIGTERM || exit 1

( trap - INT; exec "$tool" --check --jsonl --junit "$out/b.xml" --jobs 2 rules/ >"$out/b.jsonl" 2>"$out/b.err" ) &
pid=$!
for _ in $(seq 600); do  # until 3 rules are printed (at most 60 s)
  [ "$(wc -l <"$out/b.jsonl")" -ge 3 ] && break
  sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || { echo "FAIL: exit $rc after SIGINT, expected 130"; cat "$out/b.err"; exit 1; }
"$py" "$check" reports --jsonl "$out/b.jsonl" --list "$out/list" --junit "$out/b.xml" --total "$total" \
    --interrupted SIGINT || exit 1
[ "$(grep -c '"type":"rule"' "$out/b.jsonl")" -ge 3 ] || { echo "FAIL: fewer than 3 rules decided"; exit 1; }

# Reports are written to a temporary name and renamed: nothing else is left behind.
leftover=$(ls -A "$out" | grep -v -x -e list -e 'a\.\(json\|xml\|sarif\|err\)' -e 'b\.\(jsonl\|xml\|err\)')
[ -z "$leftover" ] || { echo "FAIL: left behind: $leftover"; exit 1; }
echo "interrupt OK"
