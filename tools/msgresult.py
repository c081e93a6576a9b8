"""What an NCCL ``WARN`` is followed by: the ``ncclResult_t`` its code path returns (issue 24).

Every ``WARN`` of NCCL sits in a function (or a macro of ``src/include/checks.h``) that, right
after it, returns or jumps with a result code (``return ncclInternalError;``,
``ret = ncclInvalidArgument; goto fail;``, ``RES = ncclSystemError; goto label;``) or goes on.
That code is a fact of the source, read here at each release; ``msgmap.classify`` maps a
template by it where no rule of its wording applies. Pure functions over source text.

The outcomes (a template may have several, in several places or releases):

- an ``ncclResult_t`` name: ``ncclInternalError``, ``ncclInvalidArgument``, ``ncclInvalidUsage``,
  ``ncclSystemError``, ``ncclUnhandledCudaError``, ``ncclRemoteError``, ``ncclInProgress``,
  ``ncclSuccess``: the code the path returns or sets before its ``goto``;
- ``propagated``: it returns (or jumps with) a code it got from a call (``return ret;``);
- ``returns``: it returns something that is no ``ncclResult_t`` (``return NULL;`` in a thread);
- ``continues``: the block ends (or ``break``/``continue``) without returning: NCCL warns and
  goes on;
- ``fatal``: ``abort()``/``exit()``/``throw``;
- ``api``: the WARN is in a public function of NCCL's API (declared with ``NCCL_API(...)`` in
  that file), so an invalid argument there came from the program that called NCCL.
"""

from __future__ import annotations

import re

import msgextract

RESULTS = frozenset({
    "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
    "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
})
_WARN = re.compile(r"(?<![\w:.>])WARN\s*\(")
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|[A-Za-z_]\w*|[{};]|::|.', re.S)
LOOKAHEAD = 4000  # characters read after a WARN (a handful of statements)


def _scan(code: str, start: int) -> set[str]:
    """The outcome of the code path from ``start`` (just after a WARN's ``;``)."""
    codes: set[str] = set()
    depth = 0
    expect_label = False
    pos = start
    for match in _TOKEN.finditer(code, start, min(len(code), start + LOOKAHEAD)):
        token = match.group(0)
        pos = match.end()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth < 0:
                return codes | {"continues"}
        elif token in RESULTS:
            codes.add(token)
        elif expect_label and re.fullmatch(r"[A-Za-z_]\w*", token):
            return codes or _label(code, token, pos)
        elif token == "goto":
            expect_label = True
        elif token == "return":
            end = code.find(";", pos)
            value = code[pos:end].strip()
            returned = set(re.findall(r"\bnccl[A-Z]\w*", value)) & RESULTS
            if depth == 0:
                if codes | returned:
                    return codes | returned
                return {"propagated"} if re.fullmatch(r"[a-z]\w*", value) and value not in (
                    "nullptr", "false", "true") else {"returns"}
            codes |= returned
        elif token in ("break", "continue") and depth == 0:
            return codes | {"continues"}
        elif token in ("abort", "exit", "throw") and depth == 0:
            return codes | {"fatal"}
    return codes | {"continues"} if codes else {"continues"}


def _label(code: str, label: str, start: int) -> set[str]:
    """A ``goto label`` with no code set on the way: what the label's block returns."""
    found = re.compile(r"(?<![\w:])" + re.escape(label) + r"\s*:(?!:)").search(code, start)
    if found is None:
        return {"propagated"}
    end = code.find("return", found.end())
    if end < 0:
        return {"propagated"}
    returned = set(re.findall(r"\bnccl[A-Z]\w*", code[end:code.find(";", end)])) & RESULTS
    return returned or {"propagated"}


def _statement_start(code: str, at: int) -> bool:
    """False for a WARN that is the lone statement of a brace-less ``if (...)``/``else``."""
    before = code[:at].rstrip()
    return not (before.endswith(")") or before.endswith("else"))


def outcomes(code: str) -> dict[str, set[str]]:
    """template -> outcomes of every ``WARN`` in C/C++ ``code`` (see the module docstring)."""
    code = msgextract.strip_comments(code)
    api = set(re.findall(r"\bNCCL_API\(\s*\w+\s*,\s*(\w+)", code))
    functions = _functions(code)
    out: dict[str, set[str]] = {}
    for match in _WARN.finditer(code):
        close = _call_end(code, match.end())
        found = msgextract.extract_c(code[match.start():close])
        if not found:
            continue
        end = code.find(";", close)
        after = close if end < 0 else end + 1
        # `if (x) WARN(...);`: nothing follows of its own
        result = _scan(code, after) if _statement_start(code, match.start()) else {"continues"}
        if _enclosing(functions, match.start()) in api:
            result = result | {"api"}
        out.setdefault(found[0].template, set()).update(result)
    return out


def _call_end(code: str, start: int) -> int:
    depth, i, n = 0, start, len(code)
    while i < n:
        c = code[i]
        if c == '"':
            i = msgextract.literal_end(code, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i + 1
            depth -= 1
        i += 1
    return n


def _functions(code: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each function body (or macro block) at the outermost level that
    has a parameter list; namespaces and ``extern "C"`` blocks are looked into."""
    out: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str]] = []  # (open position, name or "" for a namespace-like block)
    header_start = 0
    in_function = 0
    for match in _TOKEN.finditer(code):
        token = match.group(0)
        if token == "{":
            header = code[header_start:match.start()]
            name = ""
            if not in_function and "(" in header:
                names = re.findall(r"([A-Za-z_]\w*)\s*\(", header)
                name = names[0] if names and names[0] != "define" else (names[1] if len(
                    names) > 1 else "?")
                if "#define" in header:
                    name = re.findall(r"#define\s+(\w+)", header)[-1:][0] if re.search(
                        r"#define\s+\w+", header) else name
            stack.append((match.start(), name))
            in_function += 1 if name or in_function else 0
            header_start = match.end()
        elif token == "}":
            if stack:
                start, name = stack.pop()
                if in_function:
                    in_function -= 1
                if name and not in_function:
                    out.append((start, match.end(), name))
            header_start = match.end()
        elif token == ";" or (token == "\n"):
            header_start = match.end()
    return out


def _enclosing(functions: list[tuple[int, int, str]], at: int) -> str:
    for start, end, name in functions:
        if start <= at < end:
            return name
    return ""
