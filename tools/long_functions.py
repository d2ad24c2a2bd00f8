#!/usr/bin/env python3
"""Lists the C++ functions whose body is longer than N lines.

    tools/long_functions.py [--max N] PATH [PATH...]

Every .cpp/.cc/.cxx/.h/.hpp file under the given folders (or the given files) is read; each
free function, method, constructor or operator defined in it whose definition spans more than
N lines (default 120; from the line of its name to its closing brace) is printed as

    path:line name length

longest first. Exits 1 when any function exceeds N, else 0, so it can run as a test.

The parser is a heuristic, not a C++ front end: it blanks comments, string and character
literals (raw strings included) and preprocessor lines, then matches braces. A brace block
counts as a function body when it opens at namespace or class scope and its header has a
parenthesis but is not a namespace, class, struct, union or enum, nor an initializer
(`... = {`). Lambdas and local classes count towards the function that holds them; lambdas
assigned at namespace scope are not listed.
"""

import argparse
import os
import re
import sys

EXTENSIONS = (".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh")
SCOPE_KEYWORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b")
IDENT_BEFORE_PAREN = re.compile(r"((?:~?[A-Za-z_]\w*\s*::\s*)*(?:operator\s*[^\s(]+|operator\s*\(\s*\)|~?[A-Za-z_]\w*))\s*$")
NOT_NAMES = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof",
             "static_assert", "noexcept", "throw", "requires"}


def blank_code(text):
    """Returns `text` with comments, literals and preprocessor lines replaced by spaces.

    Newlines are kept, so offsets and line numbers stay those of the original text."""
    out = list(text)
    n = len(text)
    i = 0
    at_line_start = True   # only whitespace since the last newline

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if at_line_start and c == "#":
            # Preprocessor line, with backslash continuations.
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                j += 1
            blank(i, j)
            i = j
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
            continue
        m = re.match(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(', text[i:i + 24])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            blank(i, end)
            i = end
            continue
        if c == '"' or (c == "'" and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"))):
            # A string or character literal (a quote after a digit or letter is a digit
            # separator such as 1'000 or part of a prefix handled by the character before).
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            blank(i + 1, j - 1)
            i = j
            continue
        i += 1
    return "".join(out)


def function_name(header):
    """(qualified name, offset of the name in `header`) for a function header such as
    `int Foo::bar(int x) const`, or None when the header names no function."""
    depth = angle = 0
    for k, c in enumerate(header):
        if c == "<" and depth == 0:
            angle += 1
        elif c == ">" and angle > 0 and depth == 0:
            angle -= 1
        elif c == "(":
            if depth == 0 and angle == 0:
                m = IDENT_BEFORE_PAREN.search(header[:k])
                if m:
                    name = re.sub(r"\s+", "", m.group(1))
                    last = name.split("::")[-1]
                    # UPPER_CASE names are macros without a semicolon (Q_DECLARE_METATYPE(X)).
                    if last not in NOT_NAMES and not re.fullmatch(r"[A-Z][A-Z0-9]*_[A-Z0-9_]*", last):
                        return name, m.start(1)
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
    return None


def strip_template_prefix(header):
    """`header` without a leading `template <...>` (nested angle brackets allowed)."""
    while True:
        m = re.match(r"\s*template\s*<", header)
        if not m:
            return header
        depth, k = 1, m.end()
        while k < len(header) and depth:
            depth += {"<": 1, ">": -1}.get(header[k], 0)
            k += 1
        header = header[k:]


def matching_brace(code, k):
    """Offset of the '}' that closes the '{' at `k` (len(code) when unbalanced)."""
    depth = 0
    for j in range(k, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def classify(header):
    """What a '{' at namespace or class scope opens: ("scope"|"function"|"other", name, offset)."""
    body = strip_template_prefix(header)
    lead = len(header) - len(body)
    stripped = body.strip()
    if stripped == "" or re.match(r"extern\b", stripped) or \
            re.match(r"(inline\s+)?namespace\b|(class|struct|union|enum)\b", stripped):
        return "scope", None, 0
    paren = stripped.find("(")
    if paren < 0:
        return "other", None, 0
    before = re.sub(r"\boperator\s*[^\s(]*=+[^\s(]*", "operator", stripped[:paren])
    if "=" in before:
        return "other", None, 0   # an initializer, or a lambda held by a variable
    found = function_name(body)
    if not found:
        return "other", None, 0
    return "function", found[0], lead + found[1]


def brace_initializes_member(header):
    """True for the '{' of `x_{1}` in a constructor's initializer list `Foo() : x_{1} {`."""
    params_end = header.find(")")
    if params_end < 0 or not re.search(r"(?<!:):(?!:)", header[params_end + 1:]):
        return False
    m = re.search(r"([A-Za-z_]\w*|>)\s*$", header)
    return bool(m) and m.group(1) not in ("const", "override", "final", "noexcept", "mutable", "try")


def functions(text):
    """Yields (name, first line, last line) for every function body in `text` (1-based lines)."""
    code = blank_code(text)
    line_starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n"]

    def line_of(offset):
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    stack = []          # open blocks: (kind, name, offset of the name)
    header_start = 0    # where the text before the next '{' at scope level begins
    k = 0
    while k < len(code):
        c = code[k]
        if c == "{":
            kind, name, at = "other", None, 0
            if all(s[0] == "scope" for s in stack):
                header = code[header_start:k]
                if brace_initializes_member(header):
                    k = matching_brace(code, k) + 1
                    continue
                kind, name, at = classify(header)
                at += header_start
            stack.append((kind, name, at))
            header_start = k + 1
        elif c == "}":
            if stack:
                kind, name, at = stack.pop()
                if kind == "function":
                    yield name, line_of(at), line_of(k)
            header_start = k + 1
        elif c == ";":
            header_start = k + 1
        elif c == ":" and code[k - 1:k] != ":" and code[k + 1:k + 2] != ":" and \
                (not stack or stack[-1][0] == "scope"):
            # Access specifiers (`public:`, `public Q_SLOTS:`) end a header.
            if re.search(r"\b(public|private|protected|Q_SIGNALS|Q_SLOTS|signals|slots)\s*$", code[header_start:k]):
                header_start = k + 1
        k += 1


def source_files(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.startswith("build"))
            for f in sorted(files):
                if f.endswith(EXTENSIONS):
                    yield os.path.join(root, f)


def main(argv):
    ap = argparse.ArgumentParser(description="List C++ functions longer than N lines.")
    ap.add_argument("--max", type=int, default=120, help="longest allowed function in lines (default 120)")
    ap.add_argument("paths", nargs="+", help="folders or files to scan")
    args = ap.parse_args(argv)
    rows = []
    for path in source_files(args.paths):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"{path}: cannot read ({e.strerror})", file=sys.stderr)
            return 2
        for name, first, last in functions(text):
            length = last - first + 1
            if length > args.max:
                rows.append((length, path, first, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    for length, path, first, name in rows:
        print(f"{path}:{first} {name} {length}")
    return 1 if rows else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
