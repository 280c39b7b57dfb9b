"""What both hostile-input corpora share (tests/hostile/TOOL/hostile.py): the command line
(--list, --gen, --run), writing a generated case, and running one case under its limits.

A case must be answered with its expected exit code (0, 1 or 2; never a signal, never 3) and a
message matching its regex, within its time limit and with at most ADDRESS_SPACE_BYTES of
address space (`ulimit -v`; dropped with --no-vlimit for sanitizer builds, which reserve terabytes
of shadow memory). Python standard library only.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import time

ADDRESS_SPACE_BYTES = 2 << 30


def write_generated(path, data, keep_same_size=False):
    """Writes a generated case (bytes or str) to path and returns path; with keep_same_size an
    existing file of the same size is kept (large cases are generated once per build tree)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if keep_same_size and os.path.exists(path) and os.path.getsize(path) == len(data):
        return path
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    return path


def _limits(vlimit, cpu_s):
    def apply():
        if vlimit:
            resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if cpu_s is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s + 1, cpu_s + 2))  # SIGXCPU past the limit
    return apply


def check(name, cmd, want_rc, regex, vlimit, wall_s, cpu_s=None, json_stdout=False):
    """Runs cmd and checks it; returns 0 when the case passed, 1 otherwise (with FAIL lines).
    wall_s: wall-clock limit; cpu_s: CPU-time limit (None: none; for single-threaded tools CPU
    time does not grow when other tests load the machine)."""
    t0 = time.monotonic()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=wall_s,
                           preexec_fn=_limits(vlimit, cpu_s))
    except subprocess.TimeoutExpired:
        print(f"FAIL {name}: no answer within {wall_s} s of wall time")
        return 1
    secs = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
    print(" ".join(cmd))
    print(f"{name}: exit {p.returncode} in {cpu:.2f} s of CPU ({secs:.2f} s wall), "
          f"peak resident memory {r1.ru_maxrss // 1024} MiB")
    print(out[-4000:])
    fails = []
    if cpu_s is not None and cpu > cpu_s:
        fails.append(f"{cpu:.2f} s of CPU, more than {cpu_s} s")
    if p.returncode < 0:
        fails.append(f"killed by signal {-p.returncode}")
    elif p.returncode != want_rc:
        fails.append(f"exit {p.returncode}, expected {want_rc}")
    if not re.search(regex, out, re.M):
        fails.append(f"output does not match /{regex}/")
    try:
        p.stderr.decode("utf-8")
        if json_stdout:
            json.loads(p.stdout.decode("utf-8"))
    except ValueError as e:
        fails.append(f"{'stdout is not UTF-8 JSON' if json_stdout else 'stderr is not UTF-8'}: {e}")
    for f in fails:
        print(f"FAIL {name}: {f}")
    return 1 if fails else 0


def main(doc, cases, case_input, run_case):
    """The command line of a corpus: case_input(name, dir) -> path; run_case(name, tool, work,
    vlimit) -> 0 or 1."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--gen")
    ap.add_argument("--out", default=".")
    ap.add_argument("--run")
    ap.add_argument("--tool")
    ap.add_argument("--work", default=".")
    ap.add_argument("--no-vlimit", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(cases))
        return 0
    if a.gen:
        os.makedirs(a.out, exist_ok=True)
        print(case_input(a.gen, a.out))
        return 0
    if a.run:
        if not a.tool:
            ap.error("--run needs --tool")
        os.makedirs(a.work, exist_ok=True)
        return run_case(a.run, a.tool, a.work, not a.no_vlimit)
    ap.error("one of --list, --gen, --run")
