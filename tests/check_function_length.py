#!/usr/bin/env python3
"""No function longer than a limit (DEVELOPERS.md: about 150 lines).

  check_function_length.py [--max N] PATH...

Scans the C++ and CUDA sources (.cpp, .h, .cu, .cuh) under each PATH (a folder or a file) and fails,
naming each function with its file, line and length, when a function's body (from the line of its
opening brace to the line of its closing brace) has more than N lines (default 150). Comments, string
and character literals and preprocessor lines are skipped; a lambda counts as part of the function
around it. A function is a brace block opened at namespace or class scope after a parameter list:
"name(...) [qualifiers] {" or a constructor's "...) : member(x) {".
"""
import os
import re
import sys

SOURCE_EXT = (".cpp", ".h", ".cu", ".cuh")
NOT_FUNCTION = re.compile(r"^\s*(?:template\s*<.*>\s*)?(?:struct|class|union|enum|namespace)\b|=\s*$|=\s*\[")


def code_only(text):
    """The text with comments, literals and preprocessor lines blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" and (i == 0 or not text[i - 1].isalnum()) else None
        if m:  # raw string literal
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator (1'000)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def long_functions(path, limit):
    code = code_only(open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # one entry per open brace: True for a function body
    names = []  # the function's name, per open brace
    header_start = 0  # where the text before the next brace at namespace/class scope begins
    line = 1
    open_line = []
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            in_function = any(stack)
            header = code[header_start:i]
            is_function = False
            if not in_function:
                h = " ".join(header.split())
                # "...) {", "...) const {", "...) -> T {", "...) : a(x), b(y) {"
                is_function = (")" in h and not NOT_FUNCTION.search(h)
                               and re.search(r"\)\s*(?:const|noexcept|override|final|mutable|->[^{;]*|:[^{;]*\))*\s*$",
                                             h) is not None)
            stack.append(is_function)
            called = re.findall(r"([~\w:]+)\s*\(", header) if is_function else []
            names.append(called[0] if called else "?")
            open_line.append(line)
            header_start = i + 1
        elif c == "}":
            if stack:
                was_function = stack.pop()
                start = open_line.pop()
                name = names.pop()
                if was_function and line - start + 1 > limit:
                    found.append((start, line - start + 1, name))
            header_start = i + 1
        elif c == ";" and not any(stack):
            header_start = i + 1
    return found


def main():
    args = sys.argv[1:]
    limit = 150
    if args[:1] == ["--max"]:
        limit, args = int(args[1]), args[2:]
    if not args:
        sys.exit(__doc__)
    files = []
    for p in args:
        if os.path.isdir(p):
            for d, _, fs in os.walk(p):
                files += [os.path.join(d, f) for f in fs if f.endswith(SOURCE_EXT)]
        else:
            files.append(p)
    bad = 0
    for f in sorted(files):
        for start, length, name in long_functions(f, limit):
            print(f"{f}:{start}: {name}: {length} lines (limit {limit})")
            bad += 1
    print(f"{len(files)} files, {bad} function(s) over {limit} lines")
    return 1 if bad or not files else 0


if __name__ == "__main__":
    sys.exit(main())
