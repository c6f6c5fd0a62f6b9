"""The compiled UTF-8 check (sjsonl/records/_utf8.c) against Python's strict decoder, which is the rule:
every 1-, 2- and 3-byte input, every well-formed and ill-formed 4-byte lead with its edge continuations,
random byte strings and real text; plus the projection refusing a record whose skipped bytes are not UTF-8
whichever check runs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sjsonl.records import decode as decode_module
from sjsonl.records import fields as fields_module
from sjsonl.records.decode import _decodes
from sjsonl.records.fields import Projection

from .conftest import missing

NATIVE = decode_module.NATIVE_UTF8


def compiled_check():
    """The compiled check; skips where it was not built (a failure under .ci/run, which requires it)."""
    if NATIVE is None:
        missing("the compiled UTF-8 check (sjsonl.records._utf8) is not built here", "SJSONL_REQUIRE_NATIVE")
    return NATIVE


def python_says(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.slow  # every input up to a length: ~10 s of one core
def test_every_short_input_agrees_with_the_strict_decoder():
    native = compiled_check()
    disagree = []
    for n in (1, 2):
        for seq in itertools.product(range(256), repeat=n):
            data = bytes(seq)
            if native.valid(data) != python_says(data):
                disagree.append(data)
    edges = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF]
    edges += [0xF0, 0xF4, 0xF5, 0xFF]
    for lead in range(0xC0, 0x100):  # every lead with every second byte and edge third/fourth bytes
        for second in range(256):
            for rest in itertools.product(edges, repeat=2):
                for data in (bytes([lead, second, rest[0]]), bytes([lead, second, *rest])):
                    if native.valid(data) != python_says(data):
                        disagree.append(data)
    assert disagree == []
    assert native.valid(b"") is True


@given(st.binary(max_size=64))
def test_random_bytes_agree(data):
    native = compiled_check()
    assert native.valid(data) == python_says(data)
    # in the middle of ASCII runs of every alignment, past the 8-byte fast path
    for pad in range(9):
        padded = b"a" * pad + data + b"b" * (17 - pad)
        assert native.valid(padded) == python_says(padded)


@given(st.text(max_size=80))
def test_text_is_valid_and_any_cut_inside_a_character_is_not(text):
    native = compiled_check()
    data = text.encode("utf-8", "surrogatepass")
    assert native.valid(data) == python_says(data)
    for cut in range(len(data) + 1):
        assert native.valid(data[:cut]) == python_says(data[:cut])


def test_buffers_and_the_fallback_agree():
    native = compiled_check()
    text = "ok café 训练 テキスト 🎉".encode()
    assert native.valid(memoryview(text)) and native.valid(bytearray(text))
    assert native.valid(memoryview(text)[:-1]) is False  # the emoji cut short
    assert _decodes(text) and not _decodes(text[:-1])
    with pytest.raises(TypeError):
        native.valid("a str")


@pytest.mark.parametrize("compiled", [True, False])
def test_projection_refuses_bad_utf8_in_skipped_fields(compiled, monkeypatch):
    monkeypatch.setattr(fields_module, "_valid_utf8", compiled_check().valid if compiled else _decodes)
    p = Projection(["id"])
    p.choose([b'{"id": 1, "text": "caf\xc3\xa9"}'] * 8)  # any way; both must refuse below
    for way in (p.project, p._from_full):
        assert way(b'{"id": 1, "text": "caf\xc3\xa9"}') == {"id": 1}
        for bad in (b"caf\xe9", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"):
            with pytest.raises(ValueError):
                way(b'{"id": 1, "text": "' + bad + b'"}')
