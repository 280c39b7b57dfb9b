#!/usr/bin/env python3
"""Every ctest test carries exactly one kind label (docs/testing.md).

  check_labels.py CTEST BUILD_DIR KIND...

Lists the tests of BUILD_DIR with `ctest --show-only=json-v1` (nothing is run) and fails, naming
them, when a test has no kind label or more than one.
"""
import json
import subprocess
import sys


def main():
    ctest, build, kinds = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    out = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = json.loads(out)["tests"]
    bad = []
    for t in tests:
        labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
        found = [label for label in labels if label in kinds]
        if len(found) != 1:
            bad.append(f"{t['name']}: labels {labels}")
    for line in bad:
        print(line)
    print(f"{len(tests)} tests, {len(bad)} without exactly one kind label ({', '.join(sorted(kinds))})")
    return 1 if bad or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
