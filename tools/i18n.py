"""ddpkit's message catalogues, in one command each (Babel, a test extra).

    python tools/i18n.py extract        # po/ddpkit.pot: every _() / _n() message of src/ddpkit
    python tools/i18n.py missing [DIR]  # PO entries still to translate (of files under DIR)
    python tools/i18n.py check          # every message translated, placeholders kept, one home per
                                        # id, glossary terms one way; obsolete ones
    python tools/i18n.py compile        # po/zh_CN/*.po -> src/ddpkit/locale/zh_CN/LC_MESSAGES/ddpkit.mo

Translations live in ``po/<locale>/*.po`` fragments (one per area of the code, so work on different
areas never touches the same file); ``compile`` merges them into the one ``.mo`` the package ships.
``tests/unit/test_i18n_catalogue.py`` runs ``check`` and compares the shipped ``.mo`` with a fresh
compile.
"""

from __future__ import annotations

import datetime
import io
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import tool_exit  # tools/, the directory of the script that runs
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from ddpkit.atomic_file import replace_file  # a generated file is whole or not there

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "ddpkit"
PO_DIR = ROOT / "po"
LOCALE_DIR = SOURCE / "locale"
LOCALES = ("zh_CN",)
KEYWORDS = {"_": None, "_n": (1, 2)}
_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)  # a fixed date: same bytes
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)[^{}]*\}(?!\})")

def extract(under: Path = SOURCE) -> dict[str | tuple[str, str], list[str]]:
    """Every message id of the source files under ``under``, with where it is used."""
    found: dict[str | tuple[str, str], list[str]] = {}
    only = under.name if under.is_file() else None
    directory = under.parent if only else under
    for filename, lineno, message, _comments, _context in extract_from_dir(
            str(directory), method_map=[(only or "**.py", "python")], keywords=KEYWORDS):
        key = message if isinstance(message, str) else (message[0], message[1])
        where = f"{(directory / filename).relative_to(ROOT)}:{lineno}"
        found.setdefault(key, []).append(where)
    return found


def fragments(locale: str) -> Iterator[Path]:
    yield from sorted((PO_DIR / locale).glob("*.po"))


def merged(locale: str) -> Catalog:
    """The locale's fragments as one catalogue (the first translation of an id wins)."""
    catalog = Catalog(locale=locale, domain="ddpkit", project="ddpkit", version="",
                      creation_date=_EPOCH, revision_date=_EPOCH, fuzzy=False)
    for path in fragments(locale):
        with path.open("rb") as handle:
            part = read_po(handle, locale=locale)
        for message in part:
            if not message.id or message.id in catalog:
                continue
            if message.fuzzy or not _translated(message.string):
                continue
            catalog.add(message.id, message.string, context=message.context)
    return catalog


def _translated(string: object) -> bool:
    if isinstance(string, str):
        return bool(string)
    return isinstance(string, (tuple, list)) and all(string)


def placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


def problems(locale: str) -> list[str]:
    """What stops the locale's catalogue from being complete: untranslated ids, and
    translations whose placeholders differ from the English."""
    catalog = merged(locale)
    out: list[str] = []
    for key, places in sorted(extract().items(), key=lambda item: item[1][0]):
        message = catalog.get(key[0] if isinstance(key, tuple) else key)
        if message is None:
            out.append(f"{places[0]}: not translated to {locale}: {key!r}")
            continue
        english = " ".join(key) if isinstance(key, tuple) else key
        strings = message.string if isinstance(message.string, (tuple, list)) else [message.string]
        for string in strings:
            if placeholders(string) - placeholders(english):
                out.append(f"{places[0]}: the {locale} text names placeholders the English does "
                           f"not have: {key!r} -> {string!r}")
    return out


def duplicates(locale: str) -> list[str]:
    """Message ids translated in more than one fragment (the first by name would silently win)."""
    homes: dict[str, list[str]] = {}
    for path in fragments(locale):
        with path.open("rb") as handle:
            for message in read_po(handle, locale=locale):
                if message.id:
                    key = message.id[0] if isinstance(message.id, (tuple, list)) else message.id
                    homes.setdefault(key, []).append(path.name)
    return [f"{locale}: {key!r} is translated in {len(files)} fragments ({', '.join(files)}): "
            "keep one" for key, files in homes.items() if len(files) > 1]


GLOSSARY = PO_DIR / "GLOSSARY.md"


def banned_renderings(glossary: str) -> list[tuple[str, str, re.Pattern[str]]]:
    """(English, zh, a rendering it must not have) of the glossary's "not" table."""
    section = glossary.split("## One word for one thing", 1)
    if len(section) < 2:
        return []
    rows = []
    for line in section[1].splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != 3 or cells[0] in ("English", "---"):
            continue
        for pattern in re.findall(r"`([^`]+)`", cells[2]):
            rows.append((cells[0], cells[1], re.compile(pattern.replace("\\|", "|"))))
    return rows


def glossary_problems(locale: str) -> list[str]:
    """Translations that render a glossary term the way the glossary says not to."""
    rules = banned_renderings(GLOSSARY.read_text(encoding="utf-8"))
    out: list[str] = []
    for message in merged(locale):
        strings = message.string if isinstance(message.string, (tuple, list)) else [message.string]
        for string in strings:
            for english, chinese, pattern in rules:
                if pattern.search(string):
                    out.append(f"{locale}: {english!r} is {chinese} (po/GLOSSARY.md), not "
                               f"{pattern.pattern!r}: {message.id!r} -> {string!r}")
    return out


def obsolete(locale: str) -> list[str]:
    ids = {key[0] if isinstance(key, tuple) else key for key in extract()}
    return [str(message.id) for message in merged(locale) if message.id and
            (message.id[0] if isinstance(message.id, tuple) else message.id) not in ids]


def mo_bytes(locale: str) -> bytes:
    buffer = io.BytesIO()
    write_mo(buffer, merged(locale), use_fuzzy=False)
    return buffer.getvalue()


def mo_path(locale: str) -> Path:
    return LOCALE_DIR / locale / "LC_MESSAGES" / "ddpkit.mo"


def compile_all() -> None:
    for locale in LOCALES:
        path = mo_path(locale)
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, mo_bytes(locale))
        print(f"wrote {path.relative_to(ROOT)} ({len(merged(locale))} messages)")


def _pot(messages: dict[str | tuple[str, str], list[str]]) -> bytes:
    catalog = Catalog(domain="ddpkit", project="ddpkit", version="", creation_date=_EPOCH,
                      revision_date=_EPOCH)
    for key, places in messages.items():
        locations = [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1])) for p in places]
        catalog.add(key, locations=locations, flags=("python-brace-format",))
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=100, omit_header=False)
    return buffer.getvalue()


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    if command == "extract":
        PO_DIR.mkdir(exist_ok=True)
        replace_file(PO_DIR / "ddpkit.pot", _pot(extract()))
        print("wrote po/ddpkit.pot")
        return 0
    if command == "missing":
        under = Path(argv[1]).resolve() if len(argv) > 1 else SOURCE
        catalog = merged(LOCALES[0])
        todo = {key: places for key, places in extract(under).items()
                if (key[0] if isinstance(key, tuple) else key) not in catalog}
        sys.stdout.write(_pot(todo).decode("utf-8"))
        return 0
    if command == "check":
        failed = False
        for locale in LOCALES:
            found = problems(locale) + duplicates(locale) + glossary_problems(locale)
            for problem in found:
                print(problem)
            stale = obsolete(locale)
            if stale:
                print(f"{locale}: {len(stale)} translations of messages no longer in the source "
                      "(harmless; remove them from po/)")
            failed = failed or bool(found)
        return 1 if failed else 0
    if command == "compile":
        compile_all()
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(tool_exit.run(lambda: main(sys.argv[1:]), "i18n"))
