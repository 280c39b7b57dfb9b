#!/usr/bin/env python3
"""Hostile inputs for splatc: generates each case, runs splatc on it under a time and memory limit,
and checks the exit code and a message regex.

  hostile.py --list                       the case names, one a line (CMake registers one test each)
  hostile.py --gen CASE --out DIR         writes the case's pattern into DIR and prints its path
  hostile.py --run CASE --tool SPLATC --work DIR [--no-vlimit]
                                          generates CASE into DIR, runs splatc on it, checks it

Small cases are committed files in cases/ (hand-made bytes: invalid UTF-8, NUL, number literals);
large ones are generated here into the build directory (kept between runs: a case is rewritten
only when its generator's output would differ in size). Every case must be answered with its
expected exit code (0, 1 or 2; never a signal, never 3) within TIME_LIMIT_S seconds of CPU time
(splatc is single-threaded; CPU time, unlike wall time, does not grow when other tests load the
machine; WALL_FACTOR times as much wall time is the safety net) and with at most
2 GiB of address space (harness.ADDRESS_SPACE_BYTES) (`ulimit -v`). With that limit splatc's default memory
budget (--max-memory) is half of it, 1 GiB. --no-vlimit is for sanitizer builds, which reserve
terabytes of shadow memory and run several times slower: it drops the address-space limit, passes
--max-memory 1G instead (so that the same cases are refused) and allows SANITIZER_SLOWDOWN times
the time. Python standard library only.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402  (tests/hostile/harness.py)

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")
TIME_LIMIT_S = 10
SANITIZER_SLOWDOWN = 5
WALL_FACTOR = 6


def problem(pattern, seq_len=64, **extra):
    doc = {"seq_len": seq_len, "head_dim": 64}
    doc.update(extra)
    doc["pattern"] = pattern
    return json.dumps(doc, separators=(",", ":"))


def gen_seq_len_1e9():
    return problem({"window": {"left": 64}}, seq_len=10**9, head_dim=1)


def gen_seq_len_max():
    return problem({"window": {"left": 64, "right": 64}}, seq_len=2**31 - 1, head_dim=1)


def affine_union(n, seq_len):
    return problem({"union": [{"affine": {"slope": 1, "offset": k, "count": 1}} for k in range(n)]},
                   seq_len=seq_len)


def gen_union_1e5_affine():
    return affine_union(100000, 4096)


def gen_union_1e5_affine_small():
    # 10^5 terms on 16 rows: each row's union is one sort of 10^5 intervals, not 10^5 merges.
    return affine_union(100000, 16)


def gen_intersect_1e5_windows():
    return problem({"intersect": [{"window": {"left": 10 + k % 7, "right": 3}} for k in range(100000)]},
                   seq_len=16)


def gen_union_1000_strided():
    # Progressions of 1000 different strides: residue classes modulo a huge lcm, so the points
    # of each row are listed (about 2,900 a row) and unions of such lists merged pairwise: refused
    # by work after some hundred rows.
    return problem({"union": [{"strided": {"stride": 1000 + k}} for k in range(1000)]}, seq_len=4096)


def gen_union_primes_strided():
    # Strides 2..13: lcm 30030, about 80% of every row kept as listed points; refused by work.
    return problem({"union": [{"strided": {"stride": s}} for s in (2, 3, 5, 7, 11, 13)]}, seq_len=2**22,
                   head_dim=8)


def gen_random_blocks_per_row_1e5():
    return problem({"random_blocks": {"block": 1, "per_row": 100000}}, seq_len=100000)


def gen_random_blocks_per_row_near_all():
    # 99,999 of 100,000 blocks per row: each row block needs about 1.2 million draws.
    return problem({"random_blocks": {"block": 1, "per_row": 99999}}, seq_len=100000)


def gen_global_1e6_tokens():
    return problem({"global": {"tokens": list(range(0, 2 * 10**6, 2))}}, seq_len=2**21, head_dim=8)


def gen_deep_union():
    n = 100000
    return '{"seq_len":64,"head_dim":64,"pattern":' + '{"union":[' * n + '{"window":{}}' + "]}" * n + "}"


def gen_deep_arrays():
    n = 1000000
    return '{"seq_len":64,"head_dim":64,"name":' + "[" * n + "]" * n + ',"pattern":{"window":{}}}'


def head_problem(terms, seq_len=64, head_dim=64):
    doc = {"seq_len": seq_len, "head_dim": head_dim, "heads": len(terms), "head_patterns": terms}
    return json.dumps(doc, separators=(",", ":"))


def gen_head_patterns_65():
    return head_problem([{"window": {"left": k, "right": 0}} for k in range(65)])


def gen_head_patterns_64_long():
    # 64 distinct windows over 2^22 rows: the groups share the work limit (each gets a 64th).
    return head_problem([{"window": {"left": k, "right": k}} for k in range(64)], seq_len=2**22, head_dim=1)


def gen_head_patterns_1m_same():
    # 2^20 heads, one term each, all the same: the plain pattern.
    return head_problem([{"window": {"left": 8, "right": 8}}] * 2**20)


def gen_long_integer():
    return '{"seq_len":' + "9" * 20000 + ',"head_dim":64,"pattern":{"window":{}}}'


def gen_long_float():
    return '{"seq_len":64,"head_dim":64,"scale":1' + "0" * 400 + '.5,"pattern":{"window":{}}}'


def gen_binary_garbage():
    state = 12345
    out = bytearray()
    for _ in range(4096):
        state = (1103515245 * state + 12345) & 0x7FFFFFFF
        out.append(state >> 16 & 0xFF)
    return bytes(out)


def coo_text(rows, per_row, kv):
    # Row i keeps columns (i*7919 + k*104729) mod kv for k < per_row: distinct (104729 is odd and
    # kv a power of two), written k-major so that the points arrive unsorted.
    parts = []
    for k in range(per_row):
        parts.append(",".join("[%d,%d]" % (i, (i * 7919 + k * 104729) % kv) for i in range(rows)))
    return '{"seq_len":%d,"head_dim":64,"pattern":{"coo":[' % rows + ",".join(parts) + "]}}"


def gen_coo_1e7():
    return coo_text(65536, 153, 65536)  # 10,027,008 points


def gen_coo_1e6_bad_last():
    text = coo_text(8192, 122, 8192)  # 999,424 points, then one that is not a pair
    return text[:-3] + ",[1,2,3]]}}"


def gen_big_document():
    # 1.5 MB of empty arrays under an unknown field: about 24 MB as a document, refused by a
    # 16 MiB budget while it is read.
    return '{"seq_len":64,"head_dim":64,"junk":[' + ",".join(["[]"] * 500000) + '],"pattern":{"window":{}}}'


def gen_dense_window():
    # Every row keeps every key: analysis and statistics O(1) a row, the picture too.
    return problem({"window": {"left": 2**25, "right": 2**25}}, seq_len=2**24, head_dim=1)


def gen_strided_dense_show():
    return problem({"strided": {"stride": 3}}, seq_len=2**22, head_dim=1)


def gen_window_2e26():
    return problem({"window": {"left": 128}}, seq_len=2**26, head_dim=1)


def gen_window_2e16():
    return problem({"window": {"left": 128}}, seq_len=2**16, head_dim=1)


def gen_coo_lines():
    return problem({"window": {"left": 2**15, "right": 2**15}}, seq_len=2**15)


# name -> (generator or committed file name, expected exit code, regex on stdout+stderr,
#          splatc arguments before the pattern (default: analyze), arguments after it)
A = ["analyze"]
LIMIT = r"more than the work limit of \d+ \(--max-work\)"
CASES = {
    # The audit (issue 32).
    "seq_len_1e9": (gen_seq_len_1e9, 2, r"seq_len_1e9\.json: analysing the pattern needs at least 1e\+10 steps .*" + LIMIT),
    "seq_len_max": (gen_seq_len_max, 2, r"seq_len_max\.json: analysing the pattern needs at least .*" + LIMIT),
    "union_1e5_affine": (gen_union_1e5_affine, 2, r"analysing the pattern needs at least .* \(seq_len 4096 rows, 2e\+05 steps a row\), " + LIMIT),
    "union_1e5_affine_small": (gen_union_1e5_affine_small, 0, r"nnz +136 "),
    "intersect_1e5_windows": (gen_intersect_1e5_windows, 0, r"nnz +\d+ "),
    "union_1000_strided": (gen_union_1000_strided, 2, r"evaluating the pattern's rows needs more than \d+ steps \(stopped at row \d+ of 4096\), the work limit \(--max-work\)"),
    "union_primes_strided": (gen_union_primes_strided, 2, r"evaluating the pattern's rows needs more than \d+ steps \(stopped at row \d+ of 4194304\), the work limit \(--max-work\)"),
    "random_blocks_per_row_1e5": (gen_random_blocks_per_row_1e5, 0, r"nnz +10000000000 "),
    "random_blocks_per_row_near_all": (gen_random_blocks_per_row_near_all, 2, r"analysing the pattern needs at least .*" + LIMIT),
    "global_1e6_tokens": (gen_global_1e6_tokens, 2, r"analysing the pattern needs at least .*" + LIMIT),
    "coo_1e7": (gen_coo_1e7, 0, r"nnz +10027008 "),
    "coo_1e6_bad_last": (gen_coo_1e6_bad_last, 2, r"pattern\.coo\[999424\]: expected a pair \[i, j\], got \[1,2,3\]"),
    # Per-head patterns: at most 64 distinct terms; the groups share the work limit; many same terms.
    "head_patterns_65": (gen_head_patterns_65, 2, r"head_patterns\[64\]: more than 64 distinct patterns"),
    "head_patterns_64_long": (gen_head_patterns_64_long, 2, r"analysing the pattern needs at least .* \(seq_len 4194304 rows, .*more than the work limit of 4194304 \(--max-work\) \(one head group's share, 1/64\)"),
    "head_patterns_1m_same": (gen_head_patterns_1m_same, 0, r"nnz +1016 "),
    "deep_union": (gen_deep_union, 2, r"deep_union\.json:1:\d+: JSON nesting deeper than 64 levels \(arrays and objects\)"),
    "deep_union_emit": (gen_deep_union, 2, r"deep_union_emit\.json:1:\d+: JSON nesting deeper than 64 levels", ["emit"], ["-o", "{work}/out"]),
    "deep_union_show": (gen_deep_union, 2, r"deep_union_show\.json:1:\d+: JSON nesting deeper than 64 levels", ["show"], ["-o", "{work}/x.svg"]),
    "deep_union_bench": (gen_deep_union, 2, r"deep_union_bench\.json:1:\d+: JSON nesting deeper than 64 levels", ["bench"]),
    "deep_arrays": (gen_deep_arrays, 2, r"deep_arrays\.json:1:\d+: JSON nesting deeper than 64 levels"),
    "long_integer": (gen_long_integer, 2, r"long_integer\.json:1:\d+: invalid JSON: number overflow parsing '9{20}"),
    "long_float": (gen_long_float, 2, r"long_float\.json:1:\d+: invalid JSON: number overflow parsing"),
    "binary_garbage": (gen_binary_garbage, 2, r"binary_garbage\.json:1:1: invalid JSON: syntax error"),
    "big_document": (gen_big_document, 2, r"big_document\.json: reading the JSON document needs at least 16\.0 MiB, more than the memory budget of 16\.0 MiB \(--max-memory\)", ["--max-memory", "16M", "analyze"]),
    "file_over_budget": (gen_big_document, 2, r"file_over_budget\.json: reading the file needs at least 1\.\d MiB, more than the memory budget of 1\.0 MiB \(--max-memory\)", ["--max-memory", "1M", "analyze"]),
    "dense_window": (gen_dense_window, 0, r"nnz +281474976710656 "),
    "dense_window_columns": (gen_dense_window, 2, r"the column ACSR \(4 bytes a kept pair\) needs .* MiB, more than the memory budget", A, ["--columns"]),
    "dense_window_show": (gen_dense_window, 0, r"^$", ["show"], ["-o", "{work}/dense.png"]),
    "strided_dense_show": (gen_strided_dense_show, 2, r"strided_dense_show\.json: drawing the picture needs more than \d+ steps, the work limit \(--max-work\); a smaller --cells draws fewer cells", ["show"], ["-o", "{work}/strided.png", "--cells", "4096"]),
    "window_2e16_validate": (gen_window_2e16, 2, r"--validate evaluates the terms at all seq_len x kv_len positions: .*" + LIMIT, A, ["--validate"]),
    "window_2e26_emit": (gen_window_2e26, 2, r"(analysing the pattern needs at least|emit needs).*", ["emit"], ["-o", "{work}/out"]),
    "coo_lines": (gen_coo_lines, 2, r"writing every kept position \(--coo\) needs more than \d+ steps", A, ["--coo", "{work}/lines.coo"]),
    # committed files
    "empty": ("empty.json", 2, r"empty\.json: the file is empty \(expected a JSON object\)"),
    "whitespace": ("whitespace.json", 2, r"whitespace\.json: the file holds only white space"),
    "utf8_name": ("utf8_name.json", 2, r"utf8_name\.json:1:\d+: invalid JSON: syntax error while parsing value - invalid string: ill-formed UTF-8 byte; last read: '\"caf\\xe9\"'"),
    "utf8_outside": ("utf8_outside.json", 2, r"utf8_outside\.json:1:\d+: invalid JSON: syntax error .*\\xff"),
    "utf8_valid": ("utf8_valid.json", 0, r"café ⇒ ok: seq_len 64"),
    "nul_byte": ("nul_byte.json", 2, r"nul_byte\.json:1:16: invalid JSON: NUL byte \(\\x00\); JSON text holds no control characters"),
    "trailing_garbage": ("trailing_garbage.json", 2, r"trailing_garbage\.json:2:1: invalid JSON: syntax error while parsing value - unexpected '}'; expected end of input"),
    "int_overflow": ("int_overflow.json", 2, r"int_overflow\.json:2:14: integer 99999999999999999999 does not fit in 64 bits"),
    "int_overflow_negative": ("int_overflow_negative.json", 2, r"int_overflow_negative\.json:4:34: integer -9223372036854775809 does not fit in 64 bits"),
    "float_overflow": ("float_overflow.json", 2, r"float_overflow\.json:4:\d+: invalid JSON: number overflow parsing '1e999'"),
    "float_for_int": ("float_for_int.json", 2, r"pattern\.window\.left: expected a non-negative integer, got 1000\.0"),
    "heads_too_big": ("heads_too_big.json", 2, r"heads: expected an integer in \[1, 1048576\], got 3000000000"),
    "seed_uint64_max": ("seed_uint64_max.json", 0, r"nnz +\d+ "),
    "seed_too_big": ("seed_too_big.json", 2, r"seed_too_big\.json:1:\d+: integer 18446744073709551616 does not fit in 64 bits"),
    "negative_seq_len": ("negative_seq_len.json", 2, r"seq_len: expected an integer in \[1, 2147483647\], got -64"),
    "negative_kv_len": ("negative_kv_len.json", 2, r"kv_len: expected an integer in \[1, 2147483647\], got -1"),
    "zero_head_dim": ("zero_head_dim.json", 2, r"head_dim: expected an integer in \[1, 65536\], got 0"),
    "negative_window": ("negative_window.json", 2, r"pattern\.window\.left: expected a non-negative integer, got -3"),
    "param_too_big": ("param_too_big.json", 2, r"pattern\.window\.left: expected a non-negative integer, got 1099511627777"),
    "affine_slope_max": ("affine_slope_max.json", 0, r"nnz +3145726 "),
    "dilated_max": ("dilated_max.json", 0, r"nnz +196605 "),
    "block_window_max": ("block_window_max.json", 0, r"nnz +4294967296 "),
    "fixed_max": ("fixed_max.json", 0, r"nnz +4294967296 "),
    "fixed_big_block": ("fixed_big_block.json", 0, r"nnz +\d+ "),
    "coo_bad_element": ("coo_bad_element.json", 2, r"pattern\.coo\[2\]: expected a pair \[i, j\], got \[5,6,7\]"),
    "coo_float": ("coo_float.json", 2, r"pattern\.coo\[1\]\[1\]: expected a column in \[0, kv_len\) = \[0, 64\), got 4\.5"),
    "coo_row_range": ("coo_row_range.json", 2, r"pattern\.coo\[1\]\[0\]: expected a row in \[0, seq_len\) = \[0, 64\), got 64"),
    "coo_nested_coo": ("coo_nested_coo.json", 2, r"pattern\.coo\[1\]: expected a pair \[i, j\], got \{\"coo\":\[\[1,2\]\]\}"),
    "not_an_object": ("not_an_object.json", 2, r"not_an_object\.json: expected an object, got \[1,2,3\]"),
    "directory": ("@directory", 2, r"directory: cannot read the file: it is a directory \(expected a pattern JSON file\)"),
    "directory_show": ("@directory", 2, r"directory_show: cannot read the file: it is a directory", ["show"], ["-o", "{work}/x.svg"]),
    "missing": ("@missing", 2, r"missing\.json: cannot read the file: no such file"),
    "dev_zero": ("@/dev/zero", 2, r"/dev/zero: reading the file needs more than the memory budget of \d+\.\d MiB \(--max-memory\)"),
    "dev_zero_small_budget": ("@/dev/zero", 2, r"/dev/zero: reading the file needs more than the memory budget of 8\.0 MiB \(--max-memory\)", ["--max-memory", "8M", "analyze"]),
    "max_memory_bad": ("utf8_valid.json", 2, r"--max-memory: expected a size in bytes .* got '12Q'", ["--max-memory", "12Q", "analyze"]),
    "max_memory_zero": ("utf8_valid.json", 2, r"--max-memory: expected a size in bytes .* got '0'", ["--max-memory", "0", "analyze"]),
    "max_work_bad": ("utf8_valid.json", 2, r"--max-work: expected a whole number of steps .* got '-5'", ["--max-work=-5", "analyze"]),
    "max_work_small": ("utf8_valid.json", 2, r"analysing the pattern needs at least 640 steps .*more than the work limit of 100 \(--max-work\)", ["--max-work", "100", "analyze"]),
}


def case_input(name, work):
    src = CASES[name][0]
    if callable(src):
        return harness.write_generated(os.path.join(work, name + ".json"), src(), keep_same_size=True)
    if src == "@directory":
        path = os.path.join(work, name)
        os.makedirs(path, exist_ok=True)
        return path
    if src == "@missing":
        return os.path.join(work, "missing.json")
    if src.startswith("@"):
        return src[1:]
    return os.path.join(CASES_DIR, src)


def run_case(name, tool, work, vlimit):
    path = case_input(name, work)
    entry = CASES[name]
    before = entry[3] if len(entry) > 3 else A
    after = [a.replace("{work}", work) for a in (entry[4] if len(entry) > 4 else [])]
    if not vlimit and "--max-memory" not in before:
        before = ["--max-memory", "1G"] + before
    limit_s = TIME_LIMIT_S if vlimit else TIME_LIMIT_S * SANITIZER_SLOWDOWN
    return harness.check(name, [tool] + before + [path] + after, entry[1], entry[2], vlimit,
                         wall_s=limit_s * WALL_FACTOR, cpu_s=limit_s)


if __name__ == "__main__":
    sys.exit(harness.main(__doc__, CASES, case_input, run_case))
