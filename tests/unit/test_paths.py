"""ttseval.core.paths: the one rule for a path written inside a dataset, manifest or list file."""

from __future__ import annotations

import os
from pathlib import Path

from ttseval.core.paths import is_uri, resolve_against, within


def test_relative_paths_join_the_naming_files_folder_and_the_rest_stay_as_written(tmp_path: Path) -> None:
    manifest = tmp_path / "sets" / "items.jsonl"
    manifest.parent.mkdir()
    assert resolve_against(manifest, "clips/a.wav") == str(tmp_path / "sets" / "clips" / "a.wav")
    assert resolve_against(manifest, " ../b.wav ") == str(tmp_path / "b.wav")  # spaces stripped, '..' folded
    assert resolve_against(tmp_path / "sets", "c.wav", base_is_folder=True) == str(tmp_path / "sets" / "c.wav")
    assert resolve_against(manifest, "/data/x.wav") == "/data/x.wav"
    assert resolve_against(manifest, "s3://bucket/x.wav") == "s3://bucket/x.wav"
    # a manifest that is itself a URI: its relative paths are keys beside it
    assert resolve_against("s3://bucket/sets/items.jsonl", "clips/a.wav") == "s3://bucket/sets/clips/a.wav"
    assert resolve_against("s3://bucket/sets", "a.wav", base_is_folder=True) == "s3://bucket/sets/a.wav"
    assert is_uri("s3://b/k") and not is_uri("/tmp/k")


def test_a_folder_reached_through_a_symbolic_link_gives_one_string(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    via_link = resolve_against(tmp_path / "link" / "items.jsonl", "a.wav")
    assert via_link == resolve_against(tmp_path / "real" / "items.jsonl", "a.wav") == str(tmp_path / "real" / "a.wav")


def test_a_relative_naming_file_is_taken_from_the_working_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_against("items.jsonl", "a.wav") == str(tmp_path / "a.wav")


def test_within_resolves_dots_and_links_and_takes_uris_only_under_a_uri_root(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "prompts").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("x")
    os.symlink(tmp_path / "secret.txt", data / "prompts" / "link.wav")  # inside by name, outside in fact
    roots = [str(data)]
    assert within(str(data / "prompts" / "a.wav"), roots)  # need not exist yet
    assert within(f"file://{data}/prompts/a.wav", roots)
    assert not within(str(data / ".." / ".." / ".." / "etc" / "passwd"), roots)
    assert not within("/etc/passwd", roots) and not within("file:///etc/passwd", roots)
    assert not within(str(data / "prompts" / "link.wav"), roots)
    assert not within(str(tmp_path / "data-other" / "a.wav"), roots)  # a sibling sharing the prefix
    assert not within("s3://bucket/clips/a.wav", roots)  # a URI needs a URI root
    uri_roots = ["s3://bucket/clips/"]
    assert within("s3://bucket/clips/a.wav", uri_roots) and within("s3://bucket/clips/x/b.wav", ["s3://bucket/clips"])
    assert not within("s3://bucket/clips-2/a.wav", uri_roots)
    assert not within("s3://bucket/clips/../keys/a.wav", uri_roots)
    assert not within("https://bucket/clips/a.wav", uri_roots)
    assert not within("simplecache::s3://bucket/clips/a.wav", uri_roots)
    assert not within("/etc/passwd", [])
