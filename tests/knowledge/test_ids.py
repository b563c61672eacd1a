from __future__ import annotations

import pytest

from knowledge import ids


def test_source_id_normalises_spaces_case_and_unicode_composition():
    decomposed = "Cafe\u0301  Docs "  # "Café" written with a combining accent
    assert ids.source_id("acme", "folder", decomposed) == "src:acme:folder:café-docs"
    assert ids.source_id("acme", "folder", "café docs") == ids.source_id("acme", "folder", decomposed)


def test_colons_in_names_are_escaped_so_ids_split_one_way_only():
    source = ids.source_id("acme", "upload", "Q3: plans")
    assert source == "src:acme:upload:q3%3A-plans"
    document = ids.document_id(source, "notes/a:b.md")
    assert document == "doc:src:acme:upload:q3%3A-plans:notes/a%3Ab.md"
    parsed = ids.parse_document_id(document)
    assert (parsed.tenant, parsed.source_kind, parsed.document_key) == ("acme", "upload", "notes/a:b.md")
    assert parsed.source_id == source


def test_names_that_differ_only_by_an_escape_never_collide():
    assert ids.source_id("acme", "upload", "a:b") != ids.source_id("acme", "upload", "a%3Ab")
    assert ids.display_name(ids.normalise_source_name("a%3Ab")) == "a%3ab"


def test_chunk_id_round_trips_with_unicode_spaces_and_slashes():
    source = ids.source_id("acme", "folder", "Ürün Belgeleri")
    document = ids.document_id(source, "docs\\guía de instalación/README.md")
    chunk = ids.chunk_id(document, "code", 12)
    assert chunk == "chk:doc:src:acme:folder:ürün-belgeleri:docs/guía de instalación/README.md:code:12"
    parsed = ids.parse_chunk_id(chunk)
    assert parsed.document_key == "docs/guía de instalación/README.md"
    assert (parsed.chunk_mode, parsed.chunk_index) == ("code", 12)


@pytest.mark.parametrize(
    "key, expected",
    [("./a/./b.md", "a/b.md"), ("a//b.md", "a/b.md"), ("a\\b.md", "a/b.md"), ("  a.md ", "a.md")],
)
def test_document_keys_are_normalised_relative_paths(key, expected):
    assert ids.normalise_document_key(key) == expected


@pytest.mark.parametrize("key", ["", "  ", "/etc/passwd", "C:/x.md", "../secret", "a/../../b", ".", "./"])
def test_document_keys_that_are_empty_absolute_or_climbing_are_rejected(key):
    with pytest.raises(ids.InvalidIdentifier):
        ids.normalise_document_key(key)


@pytest.mark.parametrize(
    "call",
    [
        lambda: ids.source_id("Acme", "folder", "x"),  # uppercase slug
        lambda: ids.source_id("ac:me", "folder", "x"),
        lambda: ids.source_id("acme", "FTP!", "x"),  # not a kind's name
        lambda: ids.source_id("acme", "folder", "   "),
        lambda: ids.chunk_id("doc:src:acme:folder:x:a.md", "prose", 0),
        lambda: ids.chunk_id("doc:src:acme:folder:x:a.md", "code", -1),
        lambda: ids.chunk_id("not-a-doc-id", "code", 0),
    ],
)
def test_invalid_components_are_rejected(call):
    with pytest.raises(ids.InvalidIdentifier):
        call()


@pytest.mark.parametrize(
    "value",
    [
        "src:acme:folder",
        "src:acme:folder:x:y",
        "doc:src:acme:folder:x",
        "chk:doc:src:acme:folder:x:a.md:code:1x",
    ],
)
def test_malformed_ids_do_not_parse(value):
    parser = {"src": ids.parse_source_id, "doc": ids.parse_document_id, "chk": ids.parse_chunk_id}[value[:3]]
    with pytest.raises(ids.InvalidIdentifier):
        parser(value)


def test_control_characters_and_percent_are_escaped():
    key = ids.normalise_document_key("100%\tdone.md")
    assert key == "100%25%09done.md"
    assert ids.display_name(key) == "100%\tdone.md"


def test_text_direction_controls_are_refused_in_document_keys():
    import pytest as _pytest

    from knowledge.ids import InvalidIdentifier, normalise_document_key

    with _pytest.raises(InvalidIdentifier, match="text-direction"):
        normalise_document_key("invoice\u202efdp.md")
