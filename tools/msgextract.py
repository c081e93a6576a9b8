"""Message templates out of C/C++ and Python source text (used by ``catalogue_messages.py``).

A template is the text a logging call or an exception prints, with ``<*>`` wherever the program
inserts a value at run time (a printf ``%s``, a fmt ``{}``, an expression between ``<<`` or in
``c10::str``). Pure functions over source text: no file or git access here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

HOLE = "<*>"


@dataclass(frozen=True)
class Found:
    template: str
    level: str  # "error" | "warning" | "info"
    call: str  # the macro or call that prints it


# --- C / C++ ------------------------------------------------------------------------------------

# macro -> (level, arguments before the message, style of the message arguments)
#   printf: the first string argument is a printf format; concat: every argument is printed in
#   turn (c10::str / MakeString); fmt: the first string argument is a {fmt} format.
C_MACROS: dict[str, tuple[str, int, str]] = {
    "WARN": ("error", 0, "printf"),  # NCCL: "NCCL WARN ..."
    "INFO": ("info", 1, "printf"),  # NCCL: "NCCL INFO ..." (first argument: the subsystem mask)
    "INFO_LOC": ("info", 1, "printf"),
    "TORCH_CHECK": ("error", 1, "concat"),
    "TORCH_CHECK_WITH": ("error", 2, "concat"),
    "TORCH_CHECK_MSG": ("error", 1, "concat"),
    "TORCH_WARN": ("warning", 0, "concat"),
    "TORCH_WARN_ONCE": ("warning", 0, "concat"),
    "TORCH_INTERNAL_ASSERT": ("error", 1, "concat"),
    "C10_THROW_ERROR": ("error", 1, "concat"),
    "C10D_THROW_ERROR": ("error", 1, "concat"),
    "C10D_CHECK_WITH": ("error", 2, "concat"),
    "C10D_ERROR": ("error", 0, "fmt"),
    "C10D_WARNING": ("warning", 0, "fmt"),
    "C10D_INFO": ("info", 0, "fmt"),
    "recordError": ("warning", 0, "fmt"),  # c10d socket.cpp: logged as a warning, then raised
    "C10D_NCCL_CHECK": ("error", 1, "concat"),
    "GLOO_ENFORCE": ("error", 1, "concat"),
    "GLOO_ENFORCE_EQ": ("error", 2, "concat"),
    "GLOO_ENFORCE_NE": ("error", 2, "concat"),
    "GLOO_ENFORCE_LE": ("error", 2, "concat"),
    "GLOO_ENFORCE_LT": ("error", 2, "concat"),
    "GLOO_ENFORCE_GE": ("error", 2, "concat"),
    "GLOO_ENFORCE_GT": ("error", 2, "concat"),
    "GLOO_THROW": ("error", 0, "concat"),
    "GLOO_THROW_IO_EXCEPTION": ("error", 0, "concat"),
    "GLOO_THROW_INVALID_OPERATION_EXCEPTION": ("error", 0, "concat"),
    "GLOO_ERROR_MSG": ("error", 0, "concat"),
    "GLOO_ERROR": ("error", 0, "concat"),
    "GLOO_WARN": ("warning", 0, "concat"),
    "GLOO_INFO": ("info", 0, "concat"),
    # aws-ofi-nccl, NCCL's net plugin over libfabric (EFA): its include/nccl_ofi_log.h prints
    # through NCCL's logger, "NCCL WARN NET/OFI ..." and "NCCL INFO NET/OFI ..."
    "NCCL_OFI_WARN": ("error", 0, "printf"),
    "NCCL_OFI_INFO": ("info", 1, "printf"),
}
# What a macro prints before its message (aws-ofi-nccl's macros paste "NET/OFI " before the format)
C_PREFIX: dict[str, str] = {"NCCL_OFI_WARN": "NET/OFI ", "NCCL_OFI_INFO": "NET/OFI "}
# Calls whose message is built where it is thrown: read only when they hold real words.
C_BUILDERS: dict[str, str] = {"c10::str": "concat", "fmt::format": "fmt"}
_STREAM = re.compile(r"\b(?:LOG|C10_LOG_FIRST_N|LOG_EVERY_N|LOG_FIRST_N)\s*\(\s*(ERROR|WARNING|INFO|FATAL)\b")
_STREAM_LEVEL = {"ERROR": "error", "FATAL": "error", "WARNING": "warning", "INFO": "info"}
_MACRO = re.compile(r"(?<![\w:.>])(" + "|".join(sorted(C_MACROS, key=len, reverse=True))
                    + r"|c10::str|fmt::format)\s*\(")
# (a Python logging call may name its arguments: "%(role)s")
_PRINTF = re.compile(r"%(?:\(\w+\))?[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
                     r"(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcspn]|%%")
_FMT = re.compile(r"\{[^{}]*\}|\{\{|\}\}")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "r": "", "0": ""}


def strip_comments(code: str) -> str:
    """``code`` with C/C++ comments blanked (string and char literals kept intact)."""
    out: list[str] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c in "\"'":
            j = literal_end(code, i)
            out.append(code[i:j])
            i = j
        elif code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def literal_end(code: str, i: int) -> int:
    """The position just after the string or char literal that starts at ``code[i]`` (a quote)."""
    quote, j, n = code[i], i + 1, len(code)
    while j < n and code[j] != quote:
        if code[j] == "\\":
            j += 1
        elif code[j] == "\n":
            break  # not a literal after all ('a' in a comment-free context is fine)
        j += 1
    return j + 1


def _args(code: str, start: int, stop: str = ")") -> tuple[list[str], int]:
    """Top-level comma-separated arguments from ``start`` (just after ``(``) to the closing
    bracket (or ``;`` for a stream); returns them and the end position."""
    depth, i, n, begin = 0, start, len(code), start
    parts: list[str] = []
    while i < n:
        c = code[i]
        if c in "\"'":
            i = literal_end(code, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0 and stop == ")":
                parts.append(code[begin:i])
                return parts, i + 1
            depth -= 1
        elif c == "," and depth == 0 and stop == ")":
            parts.append(code[begin:i])
            begin = i + 1
        elif c == ";" and depth <= 0:
            parts.append(code[begin:i])
            return parts, i + 1
        i += 1
    parts.append(code[begin:])
    return parts, n


_TOKEN = re.compile(r'\s*(?:(?:u8|L|u|U)?"((?:[^"\\\n]|\\.)*)"|([A-Za-z_][\w:]*)|(.))', re.S)


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def _pieces(arg: str, style: str) -> list[str] | None:
    """The printed pieces of one argument (``HOLE`` for a value), or None when it is no string
    at all (an expression: one hole)."""
    arg = arg.strip()
    call = re.match(r"(c10::str|fmt::format|GLOO_ERROR_MSG|std::string)\s*\(", arg)
    if call and arg.endswith(")"):
        inner, _ = _args(arg, call.end())
        return _message(inner, "fmt" if call.group(1) == "fmt::format" else "concat")
    out: list[str] = []
    saw_literal = False
    for match in _TOKEN.finditer(arg):
        literal, name, other = match.groups()
        if literal is not None:
            saw_literal = True
            out.append(_unescape(literal))
        elif name is not None or (other and not other.isspace()):
            if saw_literal and name is not None and re.fullmatch(r"[A-Z_][A-Za-z0-9_]*|\w+", name):
                out.append(HOLE)  # a macro pasted between literals: "Call to " name " failed"
            else:
                return None
    return out if saw_literal else None


def _expand(text: str, style: str) -> str:
    if style == "printf":
        return _PRINTF.sub(lambda m: "%" if m.group(0) == "%%" else HOLE, text)
    if style == "fmt":
        return _FMT.sub(lambda m: {"{{": "{", "}}": "}"}.get(m.group(0), HOLE), text)
    return text


def _message(args: list[str], style: str) -> list[str]:
    out: list[str] = []
    formatted = False
    for arg in args:
        if formatted and style in ("printf", "fmt"):
            break  # the rest are the format's values
        pieces = _pieces(arg, style)
        if pieces is None:
            out.append(HOLE)
            continue
        text = "".join(pieces)
        if style in ("printf", "fmt") and not formatted:
            formatted = True
            out.append(_expand(text, style))
            if style == "printf":
                break  # the rest are the format's values
            continue
        if style == "fmt":
            continue  # values of the format
        out.append(text)
    return out


def normalise(pieces: list[str]) -> str:
    """One template string: holes merged, outer whitespace and holes trimmed."""
    text = "".join(pieces)
    text = re.sub(r"(?:<\*>\s*)+<\*>", HOLE, text)
    return text.strip()


def meaningful(template: str) -> bool:
    """A template with words a reader (and a matcher) can hold on to."""
    literal = template.replace(HOLE, " ")
    return len(re.findall(r"[A-Za-z]{3,}", literal)) >= 2 or len(literal.strip()) >= 12


def _builder_level(code: str, start: int) -> str:
    """The level of a message built where it is used (``c10::str(...)``): that of the stream it
    goes into within its statement (``LOG(WARNING) << c10::str(...)``), else error (thrown)."""
    statement = max(code.rfind(c, 0, start) for c in ";{}") + 1
    streamed = list(_STREAM.finditer(code, statement, start))
    return _STREAM_LEVEL[streamed[-1].group(1)] if streamed else "error"


def extract_c(code: str) -> list[Found]:
    """Every message template printed by the logging/check macros in C/C++ ``code``."""
    code = strip_comments(code)
    found: list[Found] = []
    for match in _MACRO.finditer(code):
        name = match.group(1)
        args, _ = _args(code, match.end())
        if name in C_BUILDERS:
            level, skip, style = _builder_level(code, match.start()), 0, C_BUILDERS[name]
        else:
            level, skip, style = C_MACROS[name]
        if name == "INFO" and args and '"' in args[0]:
            skip = 0  # an INFO-like macro of another project (no subsystem mask)
        pieces = _message(args[skip:], style)
        if name in C_PREFIX:
            pieces = [C_PREFIX[name], *pieces]
        if name.startswith("GLOO_ENFORCE") and skip and not any(p != HOLE for p in pieces):
            pieces = [HOLE]  # only the stringified condition: no words of its own
        template = normalise(pieces)
        if name in C_BUILDERS and len(re.findall(r"[A-Za-z]{3,}", template)) < 3:
            continue
        if meaningful(template):
            found.append(Found(template, level, name))
    for match in _STREAM.finditer(code):
        close = code.find(")", match.end())
        args, _ = _args(code, close + 1, stop=";")
        stream = args[0].split("<<") if args else []
        pieces = []
        for part in stream[1:]:
            got = _pieces(part, "concat")
            pieces.extend(got if got is not None else [HOLE])
        template = normalise(pieces)
        if meaningful(template):
            found.append(Found(template, _STREAM_LEVEL[match.group(1)], "LOG"))
    return found


# --- Python ---------------------------------------------------------------------------------------

_PY_LEVELS = {"error": "error", "exception": "error", "critical": "error", "fatal": "error",
              "warning": "warning", "warn": "warning", "info": "info"}
_LOGGERS = re.compile(r"(?:_?log(?:ger)?|LOG(?:GER)?|logging|_LOGGER|log_)$", re.I)
_RAISES = re.compile(r"(?:Error|Exception|Failure|Exit)$")  # an exception class's name


def _py_pieces(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            else:
                out.append(HOLE)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _py_pieces(node.left) + _py_pieces(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return [_expand("".join(_py_pieces(node.left)), "printf")]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"):
        return [_expand("".join(_py_pieces(node.func.value)), "fmt")]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
        return [HOLE]
    return [HOLE]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + "." + node.attr
    return ""


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's own body, not those of the functions or classes defined in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _held(tree: ast.AST) -> dict[ast.Name, ast.expr]:
    """The string a name holds where a call or a raise passes it as its message: the value of
    the last plain assignment to that name earlier in the same function (``message = ("..."
    " ..."); raise RuntimeError(message)``, Lightning's and torch's habit for long messages).
    Text appended afterwards (``message += ...``, often under a condition) is a hole."""
    held: dict[ast.Name, ast.expr] = {}
    for scope in ast.walk(tree):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assigned: dict[str, list[tuple[int, ast.expr]]] = {}
        appended: dict[str, list[int]] = {}
        for node in _own_nodes(scope):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                assigned.setdefault(node.targets[0].id, []).append((node.lineno, node.value))
            elif (isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
                  and isinstance(node.op, ast.Add)):
                appended.setdefault(node.target.id, []).append(node.lineno)
        for node in _own_nodes(scope):
            if not isinstance(node, ast.Name) or node.id not in assigned:
                continue
            before = [(line, value) for line, value in assigned[node.id] if line < node.lineno]
            if not before:
                continue
            line, value = max(before, key=lambda item: item[0])
            if any(line < added < node.lineno for added in appended.get(node.id, [])):
                value = ast.BinOp(value, ast.Add(), ast.Name("_appended"))
            held[node] = value
    return held


def extract_python(code: str) -> list[Found]:
    """Every message template a Python module logs at info or above, warns or raises."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    held = _held(tree)
    found: list[Found] = []
    for node in ast.walk(tree):
        message: ast.expr | None = None
        level, call = "", ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = _dotted(node.func.value)
            attr = node.func.attr
            if attr in _PY_LEVELS and _LOGGERS.search(owner.split(".")[-1] or "-"):
                message, level, call = node.args[0], _PY_LEVELS[attr], f"logger.{attr}"
                if attr == "info" and owner == "warnings":
                    message = None
            elif owner == "warnings" and attr == "warn":
                message, level, call = node.args[0], "warning", "warnings.warn"
            elif attr == "_log_and_throw" and len(node.args) > 1:
                # DistributedDataParallel's (torch/nn/parallel/distributed.py, torch 1.10 on):
                # logs the message, then raises the class it is given
                name = _dotted(node.args[0]).split(".")[-1]
                if _RAISES.search(name):
                    message, level, call = node.args[1], "error", f"raise {name}"
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name = _dotted(node.exc.func).split(".")[-1]
            if _RAISES.search(name):
                message, level, call = node.exc.args[0], "error", f"raise {name}"
        elif isinstance(node, ast.Assert) and node.msg is not None:
            # "AssertionError: <msg>" (torch 1.x's checks of the caller were often asserts)
            message, level, call = node.msg, "error", "raise AssertionError"
        if isinstance(message, ast.Name):
            message = held.get(message)
        if message is None:
            continue
        pieces = _py_pieces(message)
        if call.startswith("logger.") and isinstance(node, ast.Call) and len(node.args) > 1:
            pieces = [_expand("".join(pieces), "printf")]  # logging's own %-formatting
        template = normalise(pieces)
        if meaningful(template):
            found.append(Found(template, level, call))
    return found
