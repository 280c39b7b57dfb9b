#!/usr/bin/env python3
"""Checks trverify's reports (docs/cli.md) for the end-to-end tests and scripts/check-determinism.

  trverify_reports.py reports [--json F] [--jsonl F] [--list F] [--junit F] [--sarif F] [--total N]
                               [--interrupted SIG]
      every report is well-formed, has the documented structure, and all of them list the same
      rules; with --total, decided + not run = N; with --interrupted, the run says so; with
      --list (a --list-rules output), the JSONL rules come in its order
  trverify_reports.py same REF RUN...       each run's JSON equals REF's, times aside
  trverify_reports.py union REF SHARD...    the shards' rules are disjoint and together equal REF's
  trverify_reports.py list-union REF SHARD... the same for --list-rules outputs
Exit 0 when the check holds; 1 with a message otherwise.
"""
import json
import sys
import xml.etree.ElementTree as ET


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def without_times(x):
    if isinstance(x, dict):
        return {k: without_times(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [without_times(v) for v in x]
    return x


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def key(r):
    return (r["file"], r["line"], r["name"])


def check_json(j, total, interrupted):
    if j.get("schema_version") != 2:
        fail("schema_version is %r" % j.get("schema_version"))
    for k in ("options", "rules", "not_run", "summary", "failed_files"):
        if k not in j:
            fail("JSON has no %r" % k)
    s = j["summary"]
    if s["rules"] != len(j["rules"]) or s["not_run"] != len(j["not_run"]):
        fail("summary counts do not match the lists")
    if s["as_expected"] + s["unexpected"] != s["rules"]:
        fail("as_expected + unexpected != rules")
    verdicts = ("proved", "counterexample", "vacuous", "timeout", "unknown", "unsupported")
    if sum(s[v] for v in verdicts) != s["rules"]:
        fail("verdict counts do not add up")
    for r in j["rules"]:
        if r["verdict"] not in verdicts or (r["verdict"] == "timeout") != (r["limit"] is not None):
            fail("bad verdict/limit in %r" % (key(r),))
    if total is not None and len(j["rules"]) + len(j["not_run"]) != total:
        fail("%d decided + %d not run != %d rules" % (len(j["rules"]), len(j["not_run"]), total))
    if s["interrupted"] != interrupted:
        fail("summary.interrupted is %r, expected %r" % (s["interrupted"], interrupted))
    expected_exit = {None: None, "SIGINT": 130, "SIGTERM": 143}[interrupted]
    if expected_exit is not None and s["exit_code"] != expected_exit:
        fail("summary.exit_code is %r" % s["exit_code"])


def check_jsonl(path, j, total, interrupted):
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[-1].get("type") != "summary":
        fail("the last JSONL line is not the summary")
    rules = [x for x in lines[:-1] if x["type"] == "rule"]
    not_run = [x for x in lines[:-1] if x["type"] == "not_run"]
    if len(rules) + len(not_run) != len(lines) - 1:
        fail("JSONL has lines of unknown type")
    order = ["%s:%d %s" % key(x) for x in rules]
    if lines[-1]["summary"]["rules"] != len(rules) or lines[-1]["summary"]["not_run"] != len(not_run):
        fail("JSONL summary counts do not match its lines")
    if lines[-1]["schema_version"] != 2 or lines[-1]["summary"]["interrupted"] != interrupted:
        fail("JSONL summary: schema_version or interrupted")
    if total is not None and len(rules) + len(not_run) != total:
        fail("JSONL: %d decided + %d not run != %d rules" % (len(rules), len(not_run), total))
    if j is not None and sorted(map(key, rules)) != sorted(map(key, j["rules"])):
        fail("JSONL and JSON list different rules")
    return order


def check_junit(path, j):
    root = ET.parse(path).getroot()
    if root.tag != "testsuites":
        fail("JUnit root is <%s>" % root.tag)
    cases, skipped_not_run = [], 0
    for suite in root.findall("testsuite"):
        for a in ("name", "file", "tests", "failures", "errors", "skipped", "time", "timestamp"):
            if a not in suite.attrib:
                fail("testsuite without %r" % a)
        tcs = suite.findall("testcase")
        if int(suite.get("tests")) != len(tcs):
            fail("testsuite %s: tests=%s but %d testcases" % (suite.get("name"), suite.get("tests"), len(tcs)))
        for tc in tcs:
            if tc.get("file") != suite.get("file"):
                fail("testcase file differs from its suite")
            if tc.get("name") == "load":
                continue
            for a in ("name", "classname", "file", "line", "time"):
                if a not in tc.attrib:
                    fail("testcase without %r" % a)
            sk = tc.find("skipped")
            if sk is not None and sk.get("message", "").startswith("not run"):
                skipped_not_run += 1
            cases.append((tc.get("file"), int(tc.get("line")), tc.get("name")))
    if int(root.get("tests")) != len(root.findall(".//testcase")):
        fail("testsuites tests= does not match")
    if j is not None:
        if sorted(cases) != sorted(map(key, j["rules"] + j["not_run"])):
            fail("JUnit and JSON list different rules")
        if skipped_not_run != len(j["not_run"]):
            fail("JUnit marks %d rules not run, JSON %d" % (skipped_not_run, len(j["not_run"])))


def check_sarif(path, j):
    s = load(path)
    if s.get("version") != "2.1.0" or len(s.get("runs", [])) != 1:
        fail("not a SARIF 2.1.0 log with one run")
    run = s["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    found = []
    for res in run["results"]:
        if ids[res["ruleIndex"]] != res["ruleId"] or not res["message"]["text"]:
            fail("bad SARIF result %r" % res)
        loc = res["locations"][0]["physicalLocation"]
        found.append((loc["artifactLocation"]["uri"], loc["region"]["startLine"]))
    if j is not None:
        want = [(r["file"], r["line"]) for r in j["rules"] if not r["as_expected"]]
        if sorted(found) != sorted(want):
            fail("SARIF results %r, expected %r" % (found, want))
        if run["invocations"][0]["exitCode"] != j["summary"]["exit_code"]:
            fail("SARIF exit code differs from JSON's")


def reports(args):
    opts = {}
    it = iter(args)
    for a in it:
        opts[a.lstrip("-")] = next(it)
    j = load(opts["json"]) if "json" in opts else None
    total = int(opts["total"]) if "total" in opts else None
    if j is not None:
        check_json(j, total, opts.get("interrupted"))
    if "jsonl" in opts:
        order = check_jsonl(opts["jsonl"], j, total, opts.get("interrupted"))
        if "list" in opts:  # printed in the order of --list-rules (file, then line)
            with open(opts["list"], encoding="utf-8") as f:
                listed = [line for line in f.read().splitlines() if line]
            if [x for x in listed if x in set(order)] != order:
                fail("JSONL rules are not in file-then-line order")
    if "junit" in opts:
        check_junit(opts["junit"], j)
    if "sarif" in opts:
        check_sarif(opts["sarif"], j)
    print("reports OK")


def same(ref, runs):
    a = without_times(load(ref))
    for r in runs:
        b = without_times(load(r))
        if a != b:
            ra = {key(x): x for x in a["rules"]}
            rb = {key(x): x for x in b["rules"]}
            diff = [k for k in sorted(set(ra) | set(rb)) if ra.get(k) != rb.get(k)]
            fail("%s differs from %s in %d rule(s), first %r:\n  %s\n  %s" % (
                r, ref, len(diff), diff[0] if diff else None,
                json.dumps(ra.get(diff[0]) if diff else None)[:800],
                json.dumps(rb.get(diff[0]) if diff else None)[:800]))
    print("%d run(s) identical to %s (times aside)" % (len(runs), ref))


def union(ref, shards):
    want = without_times(load(ref))["rules"]
    got, seen = [], set()
    for s in shards:
        for r in without_times(load(s))["rules"]:
            if key(r) in seen:
                fail("rule %r is in two shards" % (key(r),))
            seen.add(key(r))
            got.append(r)
    if sorted(got, key=key) != sorted(want, key=key):
        fail("the shards' rules differ from the whole run's")
    print("%d shards: the same %d rules and verdicts as %s" % (len(shards), len(want), ref))


def list_union(ref, shards):
    def lines(p):
        with open(p, encoding="utf-8") as f:
            return [line for line in f.read().splitlines() if line]
    want = lines(ref)
    got = [line for s in shards for line in lines(s)]
    if len(set(got)) != len(got):
        fail("a rule is listed in two shards")
    if sorted(got) != sorted(want):
        fail("the shards list other rules than the whole run")
    print("%d shards: the same %d rules as %s" % (len(shards), len(want), ref))


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "reports":
        reports(args)
    elif cmd == "same":
        same(args[0], args[1:])
    elif cmd == "union":
        union(args[0], args[1:])
    elif cmd == "list-union":
        list_union(args[0], args[1:])
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
