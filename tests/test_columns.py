"""Names as a person reads them, and labels as the job reads them."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from fedforest.columns import (
    clean_name,
    how_names_differ,
    look_alike_groups,
    look_alike_note,
    match_look_alikes,
    name_problem,
    normalize_labels,
    reading_key,
    shell_word,
    spelled,
)

NFC = unicodedata.normalize("NFC", "glucosé")
NFD = unicodedata.normalize("NFD", "glucosé")


@pytest.mark.parametrize(
    "other",
    [
        "BMI",
        "Bmi",
        "bmi ",
        " bmi",
        "bmi\u00a0",  # no-break space
        "bmi\u202f",  # narrow no-break space
        "bm\u200bi",  # zero-width space
        "\ufeffbmi",  # byte-order mark
        "b\u2060mi",  # word joiner
        "ｂｍｉ",  # full-width letters (NFKC)
        "bmi\t",
    ],
)
def test_names_that_look_like_bmi_read_as_bmi(other):
    assert reading_key(other) == reading_key("bmi")
    assert look_alike_groups(["age", "bmi", other]) == [["bmi", other]]


def test_nfc_and_nfd_spellings_read_alike_and_show_differently():
    assert NFC != NFD and reading_key(NFC) == reading_key(NFD)
    assert look_alike_groups([NFC, "age", NFD]) == [[NFC, NFD]]
    assert spelled(NFC) != spelled(NFD) and "\\u0301" in spelled(NFD)
    assert spelled("bmi") == "'bmi'"
    assert name_problem(NFD) is None  # one spelling alone is fine; two that read alike are not


@pytest.mark.parametrize("name", ["bmi_2", "bmi2", "b mi", "BMI-z", "age"])
def test_names_that_read_differently_are_kept_apart(name):
    assert look_alike_groups(["bmi", name]) == []


def test_equal_names_are_one_name_and_groups_keep_their_order():
    assert look_alike_groups(["bmi", "bmi", "Age", "BMI", "age"]) == [
        ["bmi", "BMI"],
        ["Age", "age"],
    ]


def test_matching_two_lists():
    assert match_look_alikes(["bmi", "age", NFC], ["BMI", "age", NFD, "sex"]) == {
        "BMI": "bmi",
        NFD: NFC,
    }
    # a name that reads like two wanted names (themselves look-alikes) is not guessed
    assert match_look_alikes(["bmi", "BMI"], ["Bmi"]) == {}


@pytest.mark.parametrize(
    "name, clean, words",
    [
        ("bmi ", "bmi", "spaces around it"),
        ("bmi\u00a0", "bmi", "U+00A0 (NO-BREAK SPACE)"),
        ("bm\u200bi", "bmi", "U+200B (ZERO WIDTH SPACE)"),
        ("\ufeffage", "age", "U+FEFF"),
        ("a\x07b", "ab", "U+0007 (a control character)"),
    ],
)
def test_a_name_with_invisible_characters_or_spaces_says_which_and_its_plain_spelling(
    name, clean, words
):
    assert clean_name(name) == clean
    why = name_problem(name)
    assert words in why and repr(clean) in why


@pytest.mark.parametrize("name", ["bmi", "blood pressure", "BMI", "glucosé", "m²"])
def test_plain_names_have_no_problem(name):
    assert name_problem(name) is None


def test_integer_valued_labels_beyond_int64_stay_text_without_a_warning():
    with np.errstate(all="raise"):
        big = normalize_labels(np.array([1e30, 2e30, -3e30]))
    assert big.dtype.kind == "U"
    assert normalize_labels(np.array([0.0, 1.0, 2.0])).dtype == np.int64
    assert normalize_labels([2.0**62, 1.0]).dtype == np.int64


@pytest.mark.parametrize(
    "name, other, words",
    [
        ("BMI", "bmi", "differs in case"),
        ("bm\u200bi", "bmi", "U+200B (ZERO WIDTH SPACE)"),
        ("bmi\u00a0", "bmi", "U+00A0 (NO-BREAK SPACE)"),
        ("\uff42\uff4d\uff49", "bmi", "compatibility characters"),
        (unicodedata.normalize("NFD", "glucosé"), NFC, "another Unicode form"),
        ("\ufb01ber", "fiber", "compatibility characters"),  # the ligature fi
    ],
)
def test_how_two_look_alike_names_differ_is_said(name, other, words):
    assert reading_key(name) == reading_key(other)
    assert words in how_names_differ(name, other)


@pytest.mark.parametrize(
    "text", ["bmi=bmi", "bm\u200bi=bmi", "\uff42\uff4d\uff49=bmi", "it's=x", "a\\b\u00a0=c"]
)
def test_a_shell_word_is_the_same_text_once_the_shell_reads_it(text):
    import shutil
    import subprocess

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    out = subprocess.run(
        ["bash", "-c", f"printf %s {shell_word(text)}"], capture_output=True, text=True, check=True
    )
    assert out.stdout == text and shell_word(text).isascii()


@pytest.mark.parametrize(
    "given, names, column",
    [
        ("Outcome", ["age", "outcome"], "'outcome'"),
        ("bmi", ["age", "bm\u200bi"], '"bm\\u200bi"'),
        ("glucosé", ["age", unicodedata.normalize("NFD", "glucosé")], '"glucose\\u0301"'),
    ],
)
def test_a_name_that_is_not_a_column_names_the_column_that_reads_like_it(given, names, column):
    note = look_alike_note(given, names)
    assert f"the column {column} reads like it" in note and "names must match exactly" in note
    assert look_alike_note("weight", names) == ""


@pytest.mark.parametrize(
    "name",
    [
        "bmi\u034f",  # combining grapheme joiner (Mn)
        "bmi\ufe0f",  # variation selector (Mn)
        "bmi\U000e0101",  # variation selector supplement (Mn)
        "bmi\u3164",  # Hangul filler (Lo)
        "bmi\u180e",  # Mongolian vowel separator (Cf)
        "bmi\u2800",  # blank Braille pattern (So), a blank
    ],
)
def test_default_ignorable_and_blank_characters_are_invisible_in_a_name(name):
    assert reading_key(name) == reading_key("bmi")
    assert clean_name(name) == "bmi"
    assert f"U+{ord(name[-1]):04X}" in name_problem(name)


def test_a_name_mixing_latin_and_cyrillic_reads_as_its_latin_look_alike():
    mixed = "bm\u0456"  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
    assert reading_key(mixed) == reading_key("bmi") and clean_name(mixed) == "bmi"
    assert "mixes Latin and Cyrillic letters" in name_problem(mixed)
    assert "U+0456" in name_problem(mixed)
    russian = "\u0440\u043e\u0441\u0442"  # one script: a name of its own
    assert name_problem(russian) is None and reading_key(russian) != reading_key("poct")
    assert name_problem("\u03b1-amylase") is None  # Greek and Latin mix in real names
