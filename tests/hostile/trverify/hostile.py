#!/usr/bin/env python3
"""Hostile inputs for trverify: generates each case, runs trverify on it under a time and memory
limit, and checks the exit code and a message regex.

  hostile.py --list                       the case names, one a line (CMake registers one test each)
  hostile.py --gen CASE --out DIR         writes DIR/CASE.tr (or the committed file's path) and exits
  hostile.py --run CASE --tool TRVERIFY --work DIR [--no-vlimit]
                                          generates CASE into DIR, runs trverify on it, checks it

Small cases are committed files in cases/ (they are hand-made bytes: invalid UTF-8, NUL, ...);
large ones are generated here into the build directory. Every case must be answered with its
expected exit code (0, 1 or 2; never a signal, never 3) within TIME_LIMIT_S seconds and with at
most 2 GiB of address space (harness.ADDRESS_SPACE_BYTES) (`ulimit -v`; --no-vlimit drops it for sanitizer builds,
which reserve terabytes of shadow memory). Python standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402  (tests/hostile/harness.py)

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")
TIME_LIMIT_S = 10

HEADER = "rclass R\n  map s : R\n  tensor A, B : {R: s}\n"


def rule(name, lhs, rhs, expect=None, dtypes="num", extra=""):
    out = f'rule {name} : {dtypes} {{\n  {HEADER}{extra}  lhs {lhs}\n  rhs {rhs}\n'
    if expect:
        out += f"  expect {expect}\n"
    return out + "}\n"


def chain(op, term, n):
    return f" {op} ".join([term] * n)


def balanced_sum(term, n):
    """`term` n times, summed as a balanced tree (depth log2 n)."""
    if n == 1:
        return term
    h = n // 2
    return f"({balanced_sum(term, h)} + {balanced_sum(term, n - h)})"


def gen_deep_parens():
    n = 10000
    return rule("deep_parens", "(" * n + "A" + ")" * n, "A")


def gen_deep_unary():
    return rule("deep_unary", "-" * 20000 + "A", "A")


def gen_deep_not():
    return rule("deep_not", "!" * 20001 + "A", "A", dtypes="bool")


def gen_deep_calls():
    n = 10000
    return rule("deep_calls", "abs(" * n + "A" + ")" * n, "abs(A)")


def gen_deep_braces():
    n = 10000
    return rule("deep_braces", "const(0, " + "{R: " * n + "s" + "}" * n + ")", "A")


def gen_long_chain():
    return rule("long_chain", chain("+", "A", 20000), "A * 20000")


def gen_sum_9000_chain():
    return rule("sum_9000_chain", chain("+", "A", 9000), "A * 9000", expect="proved")


def gen_false_chain_5000():
    return rule("false_chain_5000", chain("+", "A", 5000), "A * 4999", expect="counterexample")


def gen_sum_9000_balanced():
    # Deep enough to exercise size, not depth: a balanced tree of 9000 terms is 14 levels deep.
    return rule("sum_9000_balanced", balanced_sum("A", 9000), "A * 9000", expect="proved")


def gen_false_balanced_5000():
    return rule("false_balanced_5000", balanced_sum("A", 5000), "A * 4999", expect="counterexample")


def gen_let_doubling():
    lines = ["let x0 = A"] + [f"let x{k} = x{k - 1} + x{k - 1}" for k in range(1, 29)]
    extra = "".join(f"  {ln}\n" for ln in lines)
    return rule("let_doubling", "x28", "A * 268435456", expect="proved", dtypes="int", extra=extra)


def gen_let_doubling_false():
    lines = ["let x0 = A"] + [f"let x{k} = x{k - 1} + x{k - 1}" for k in range(1, 29)]
    extra = "".join(f"  {ln}\n" for ln in lines)
    return rule("let_doubling_false", "x28", "A * 268435455", expect="counterexample", dtypes="int",
                extra=extra)


def gen_let_doubling_literals():
    # A let chain of literals only: the checker retypes the shared (poly) subtree once per node.
    lines = ["let c0 = 1"] + [f"let c{k} = c{k - 1} + c{k - 1}" for k in range(1, 29)]
    extra = "".join(f"  {ln}\n" for ln in lines)
    return rule("let_doubling_literals", "A + c28", "A + 268435456", expect="proved", dtypes="int",
                extra=extra)


def doubling(name, step, rhs, expect, dtypes="num"):
    lines = ["let x0 = A"] + [f"let x{k} = " + step.format(p=f"x{k - 1}") for k in range(1, 29)]
    extra = "".join(f"  {ln}\n" for ln in lines)
    return rule(name, "x28", rhs, expect=expect, dtypes=dtypes, extra=extra)


def gen_let_doubling_ops():
    return (doubling("doubling_max", "max({p}, {p})", "A", "proved")
            + doubling("doubling_select", "select({p} > B, {p}, {p})", "A", "proved")
            + doubling("doubling_abs", "abs({p}) + abs({p})", "abs(A) * 268435456", "proved", "int")
            + doubling("doubling_div", "({p} + {p}) / 2", "A", "proved", "real"))


def gen_let_doubling_mul():
    return doubling("let_doubling_mul", "{p} * {p}", "A", None)


def gen_let_reverse_chain():
    # 5000 lets, each using the one declared after it: checking them in writing order recurses.
    n = 5000
    lines = [f"let x{k} = x{k + 1} + A" for k in range(n)] + [f"let x{n} = A"]
    extra = "".join(f"  {ln}\n" for ln in lines)
    return rule("let_reverse_chain", "x0", f"A * {n + 1}", extra=extra)


def gen_nested_pow():
    # Degree 262144: the solver keeps x^n as n factors, so the checker bounds the degree.
    return rule("nested_pow", "pow(pow(pow(A, 64), 64), 64)", "pow(pow(pow(A, 64), 64), 64)",
                expect="proved", dtypes="int")


def gen_nested_pow_4096():
    # Degree 4096, the highest the checker accepts: 128 multiplications as a DAG.
    return rule("nested_pow_4096", "pow(pow(A, 64), 64)", "pow(pow(A, 64), 64)", expect="proved",
                dtypes="int")


def gen_nested_pow_deep():
    n = 12
    return rule("nested_pow_deep", "pow(" * n + "A" + ", 64)" * n, "A", dtypes="int")


def gen_nested_pad():
    # Every pad's size mentions its operand's size twice: as trees the size terms would double per
    # level. (The rank bound grows by one per level too, so the solver's work grows with n.)
    n = 10
    return rule("nested_pad", "pad(" * n + "A" + ", 0, low={R: 1})" * n, "pad(A, 0, low={R: %d})" % n,
                expect="proved")


def gen_wide_concat():
    n = 1000
    return ("rule wide_concat : num {\n  rclass K single\n  map s : K\n  tensor A : {K: s}\n"
            f"  lhs concat({', '.join(['A'] * n)}, axis=K)\n  rhs concat({', '.join(['A'] * n)}, axis=K)\n"
            "  expect proved\n}\n")


def gen_concat_100k():
    n = 100000
    return ("rule concat_100k : num {\n  rclass K single\n  map s : K\n  tensor A : {K: s}\n"
            f"  lhs concat({', '.join(['A'] * n)}, axis=K)\n  rhs A\n}}\n")


def gen_sum_100k_balanced():
    return rule("sum_100k_balanced", balanced_sum("A", 100000), "A * 100000")


def gen_many_rules():
    return "".join(rule(f"r{i}", "A + B", "B + A") for i in range(10000))


def gen_long_line():
    # An error at the end of a 40 KB line: the diagnostic shows a window, not the line.
    return rule("long_line", "A" + " " * 40000 + "+ C", "A")


def gen_long_line_ok():
    return rule("long_line_ok", "A" + " " * 40000 + "+ B", "B + A", expect="proved")


def gen_binary_garbage():
    state = 12345
    out = bytearray()
    for _ in range(4096):
        state = (1103515245 * state + 12345) & 0x7FFFFFFF
        out.append(state >> 16 & 0xFF)
    return bytes(out)


def gen_huge_int():
    # Exact at any size up to the 10,000-digit limit: refuted with the literal in full.
    return rule("huge_int", "A + " + "9" * 5000, "A")


def gen_too_many_digits():
    return rule("too_many_digits", "A + " + "9" * 20000, "A")


# name -> (generator or committed file name, expected exit code, regex on stdout+stderr, extra args)
CASES = {
    "deep_parens": (gen_deep_parens, 2, r"deep_parens\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "deep_unary": (gen_deep_unary, 2, r"deep_unary\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "deep_not": (gen_deep_not, 2, r"deep_not\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "deep_calls": (gen_deep_calls, 2, r"deep_calls\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "deep_braces": (gen_deep_braces, 2, r"deep_braces\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "long_chain": (gen_long_chain, 2, r"long_chain\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "sum_9000_chain": (gen_sum_9000_chain, 2, r"sum_9000_chain\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "false_chain_5000": (gen_false_chain_5000, 2, r"false_chain_5000\.tr:5:\d+: error: expression nesting deeper than \d+"),
    "sum_9000_balanced": (gen_sum_9000_balanced, 0, r"PROVED .*sum_9000_balanced "),
    "false_balanced_5000": (gen_false_balanced_5000, 0, r"COUNTEREXAMPLE .*false_balanced_5000 "),
    "let_doubling": (gen_let_doubling, 0, r"PROVED .*let_doubling "),
    "let_doubling_false": (gen_let_doubling_false, 0, r"COUNTEREXAMPLE .*let_doubling_false "),
    "let_doubling_literals": (gen_let_doubling_literals, 0, r"PROVED .*let_doubling_literals "),
    "let_doubling_ops": (gen_let_doubling_ops, 0, r"4 rules: 4 proved"),
    "let_doubling_mul": (gen_let_doubling_mul, 2, r"let_doubling_mul\.tr:18:\d+: error: the degree of this product exceeds 4096"),
    "let_reverse_chain": (gen_let_reverse_chain, 2, r"let_reverse_chain\.tr:\d+:\d+: error: expression nesting deeper than \d+"),
    "nested_pow": (gen_nested_pow, 2, r"nested_pow\.tr:5:\d+: error: the degree of this product exceeds 4096"),
    "nested_pow_4096": (gen_nested_pow_4096, 0, r"PROVED .*nested_pow_4096 "),
    "nested_pow_deep": (gen_nested_pow_deep, 2, r"nested_pow_deep\.tr:5:\d+: error: the degree of this product exceeds 4096"),
    "nested_pad": (gen_nested_pad, 0, r"PROVED .*nested_pad "),
    "wide_concat": (gen_wide_concat, 0, r"PROVED .*wide_concat "),
    "concat_100k": (gen_concat_100k, 2, r"concat_100k\.tr:5:7: error: 'concat' takes at most 1000 operands, got 100000"),
    "sum_100k_balanced": (gen_sum_100k_balanced, 2, r"sum_100k_balanced\.tr:5:\d+: error: the rule is too large: its expressions have more than 40000 operands"),
    # Loading and checking 10,000 rules; verifying all of them is 20,000 solver runs (minutes).
    "many_rules": (gen_many_rules, 0, r"PROVED .*r9999 .*\n1 rule: 1 proved", ["--rule", "r9999"]),
    "long_line": (gen_long_line, 2, r"long_line\.tr:5:\d+: error: undeclared name 'C'\n\.\.\.[^\n]{1,200}\n {1,200}\^\n"),
    "long_line_ok": (gen_long_line_ok, 0, r"PROVED .*long_line_ok "),
    "binary_garbage": (gen_binary_garbage, 2, r"binary_garbage\.tr:\d+:\d+: error: "),
    "huge_int": (gen_huge_int, 1, r"COUNTEREXAMPLE"),
    "too_many_digits": (gen_too_many_digits, 2, r"too_many_digits\.tr:5:\d+: error: number literal has more than 10000 digits"),
    # committed files
    "empty": ("empty.tr", 2, r"empty\.tr: error: no rules in this file"),
    "comments_only": ("comments_only.tr", 2, r"comments_only\.tr: error: no rules in this file"),
    "utf8_title": ("utf8_title.tr", 2, r"utf8_title\.tr:1:\d+: error: invalid UTF-8 byte 0xe9 .*byte offset \d+"),
    "utf8_ident": ("utf8_ident.tr", 2, r"utf8_ident\.tr:4:\d+: error: invalid UTF-8 byte 0xff"),
    "utf8_comment": ("utf8_comment.tr", 2, r"utf8_comment\.tr:2:\d+: error: invalid UTF-8 byte 0xc0"),
    "utf8_title_json": ("utf8_title.tr", 2, r"invalid UTF-8 byte 0xe9", ["--json"]),
    "utf8_valid": ("utf8_valid.tr", 0, r"PROVED .*utf8_valid "),
    "utf8_valid_json": ("utf8_valid.tr", 0, r'"title": "A \+ B ⇒ B \+ A \(café\)"', ["--json"]),
    "nul_in_rule": ("nul_in_rule.tr", 2, r"nul_in_rule\.tr:5:\d+: error: control character \\x00 .*\n.*\\x00"),
    "nul_in_comment": ("nul_in_comment.tr", 2, r"nul_in_comment\.tr:1:\d+: error: control character \\x00"),
    "unterminated_rule": ("unterminated_rule.tr", 2, r"unterminated_rule\.tr:6:1: error: expected '\)', found end of file"),
    "empty_dir": ("empty_dir", 2, r"empty_dir: error: no \*\.tr files in this directory"),
}


def case_input(name, work):
    src = CASES[name][0]
    if callable(src):
        return harness.write_generated(os.path.join(work, name + ".tr"), src())
    if src == "empty_dir":
        path = os.path.join(work, "empty_dir")
        os.makedirs(os.path.join(path, "sub"), exist_ok=True)
        with open(os.path.join(path, "sub", "notes.txt"), "w") as f:
            f.write("not a rule file\n")
        return path
    return os.path.join(CASES_DIR, src)


def run_case(name, tool, work, vlimit):
    path = case_input(name, work)
    entry = CASES[name]
    args = entry[3] if len(entry) > 3 else []
    return harness.check(name, [tool, "--check"] + args + [path], entry[1], entry[2], vlimit,
                         wall_s=TIME_LIMIT_S, json_stdout="--json" in args)


if __name__ == "__main__":
    sys.exit(harness.main(__doc__, CASES, case_input, run_case))
