"""Issue 35: two sentences joined in Chinese output get the glue of where they meet (a part may
stay English: a log's words), never "…to complete.有一个 rank…"; English stays " ".join."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, use_language
from ddpkit.wording import sentences

CHINESE = _("Every interface NCCL listed is a container bridge.")


@pytest.fixture()
def zh() -> Iterator[None]:
    use_language("zh")
    yield
    use_language("en")


def test_english_is_a_plain_join() -> None:
    text = sentences(["one.", "two", "three."])
    assert text == "one. two three." and text.localized() == "one. two three."


@pytest.mark.parametrize(("first", "then", "joined"), [
    ("rank 3 waited for the collective to complete.", "有一个 rank", "complete. 有一个 rank"),
    ("rank 3 waited", "有一个 rank", "waited。有一个 rank"),
    ("等了。", "有一个 rank", "等了。有一个 rank"),
    ("等了", "有一个 rank", "等了。有一个 rank"),
    ("等了。", "then English", "等了。then English"),
])
def test_the_glue_is_the_one_where_they_meet(zh: None, first: str, then: str,
                                             joined: str) -> None:
    assert joined in sentences([first, then]).localized()


def test_a_rules_facts_then_the_catalogues_explanation(zh: None) -> None:
    shown = specific_then_general(["rank 3 timed out."], CHINESE).localized()
    assert shown.startswith("rank 3 timed out. NCCL 列出的")
    assert specific_then_general([CHINESE], CHINESE).localized().count("。") == 2
