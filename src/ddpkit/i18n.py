"""Translated text: every user-facing string is written as ``_("English, {name}", name=value)``.

``_`` returns a :class:`Text`: a ``str`` whose value is the English text (what ``--json``, logs
and tests see), which also remembers its template and values, so the one place that
writes to the terminal (``ddpkit.cli.output.render``) can show it in the user's language with
:func:`localized`. English is the message id (gettext's convention); placeholders are named, and a
template never comes from an f-string. ``_n(singular, plural, n, ...)`` is the plural form.

The catalogues are gettext ``.mo`` files under ``ddpkit/locale`` built from ``po/`` by
``python tools/i18n.py compile``. The language is chosen once by the CLI (:func:`use_language`,
from ``--lang`` or :func:`language_from_environment`); the library never reads the environment.
"""

from __future__ import annotations

import gettext
import numbers
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

Language = Literal["en", "zh"]
LANGUAGES: tuple[Language, ...] = ("en", "zh")
_CATALOGUE_LOCALE: dict[Language, str] = {"zh": "zh_CN"}
DOMAIN = "ddpkit"
LOCALE_DIR = Path(__file__).with_name("locale")
# Read in this order, as gettext itself does: the first one set decides.
LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")

_catalogue: gettext.NullTranslations = gettext.NullTranslations()
_language: Language = "en"


class Text(str):
    """A user-facing text: its ``str`` value is English; :meth:`localized` is the current
    language's. ``str()`` of it (and of an exception whose one argument it is) is the Text itself,
    so ``str(exc)`` keeps the translation; ``+``, slicing, ``join`` and f-strings give plain
    English text: pass a Text as a placeholder value instead (``tests/unit/test_text_kept.py``)."""

    template: str
    plural: str | None
    number: int
    values: Mapping[str, object]

    def __new__(cls, template: str, /, **values: object) -> Text:
        return cls._make(template, None, 1, values)

    @classmethod
    def _make(cls, template: str, plural: str | None, count: int,
              values: Mapping[str, object]) -> Text:
        chosen = template if plural is None or count == 1 else plural
        self = super().__new__(cls, _fill(chosen, values, english=True))
        self.template, self.plural, self.number, self.values = template, plural, count, values
        return self

    def __str__(self) -> str:
        return self

    def localized(self, clean: Callable[[str], str] | None = None) -> str:
        """This text in the language chosen by :func:`use_language` (English when the catalogue
        lacks it, or when its translation does not fit the values). ``clean``: what every value
        that is not itself a :class:`Text` goes through first (the renderer's sanitiser: the
        template is ddpkit's own, the values may come from anywhere)."""
        if _language == "en":
            translated = self.template if self.plural is None or self.number == 1 else self.plural
        elif self.plural is None:
            translated = _catalogue.gettext(self.template)
        else:
            translated = _catalogue.ngettext(self.template, self.plural, self.number)
        if clean is None and _language == "en":
            return str.__str__(self)
        try:
            return _fill(translated, self.values, english=False, clean=clean)
        except (KeyError, IndexError, ValueError, TypeError):
            # (a translation that does not fit the values, or a value whose format needs the
            # object itself: the English text, cleaned whole)
            return str.__str__(self) if clean is None else clean(str.__str__(self))


def _fill(template: str, values: Mapping[str, object], *, english: bool,
          clean: Callable[[str], str] | None = None) -> str:
    if not values:
        return template
    if clean is not None:
        return template.format(**{name: _cleaned(value, clean) for name, value in values.items()})
    shown = values if english else {name: localized(value) if isinstance(value, str) else value
                                    for name, value in values.items()}
    return template.format(**shown)


def _cleaned(value: object, clean: Callable[[str], str]) -> object:
    """A value as the renderer shows it: a Text in the current language with its own values
    cleaned, a number as it is, anything else (a string, a path, an exception) as cleaned text."""
    if isinstance(value, Text):
        return value.localized(clean)
    if isinstance(value, numbers.Real):
        return value
    return clean(value if isinstance(value, str) else str(value))


def _(template: str, /, **values: object) -> Text:
    """A user-facing text (see the module's docstring)."""
    return Text(template, **values)


def _n(singular: str, plural: str, count: int, /, **values: object) -> Text:
    """A user-facing text with a plural: ``count`` picks the form (and is the ``{count}`` value
    unless ``values`` names another)."""
    return Text._make(singular, plural, count, {"count": count, **values})


def localized(text: str) -> str:
    """``text`` in the current language when it is a :class:`Text`, else as it is."""
    return text.localized() if isinstance(text, Text) else text


def language_from_environment(environ: Mapping[str, str]) -> Language:
    """The language the locale variables ask for (gettext's order), English when none is one of
    ddpkit's languages: ``zh_CN.UTF-8``, ``zh``, ``zh_TW`` and ``LANGUAGE=zh_CN:en`` give zh."""
    for variable in LOCALE_VARIABLES:
        value = environ.get(variable, "")
        if not value:
            continue
        for entry in value.split(":"):
            code = entry.split(".")[0].split("@")[0].split("_")[0].lower()
            if code in LANGUAGES:
                return code
            if code in ("c", "posix"):
                return "en"
        return "en"
    return "en"


def use_language(language: Language) -> None:
    """Show user-facing text in ``language`` from now on (the CLI calls this once, early)."""
    global _catalogue, _language
    _language = language
    locale_name = _CATALOGUE_LOCALE.get(language)
    if locale_name is None:
        _catalogue = gettext.NullTranslations()
        return
    _catalogue = gettext.translation(DOMAIN, str(LOCALE_DIR), languages=[locale_name],
                                     fallback=True)


def current_language() -> Language:
    return _language
