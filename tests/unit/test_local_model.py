"""ttseval.providers.local_model: a model loaded once however many threads ask at the same time, a failed load tried
again, and the messages of the argument checks the local-model providers share."""

from __future__ import annotations

import linecache
import sys
import threading
import time
from pathlib import Path

import pytest

from ttseval.providers.local_model import LazyModel, model_source, refuse_model_name, required_path

THREADS = 8


def _parked(thread: threading.Thread, inside_loader: set[int]) -> bool:
    """Whether `thread` is inside the loader, or waits in LazyModel.get on the line that takes its lock."""
    if thread.ident in inside_loader:
        return True
    frame = sys._current_frames().get(thread.ident)  # type: ignore[arg-type]
    return (
        frame is not None
        and frame.f_code is LazyModel.get.__code__
        and "_lock" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    )


def test_threads_that_ask_at_once_load_the_model_once() -> None:
    """THREADS threads start get() together (a barrier); the first load is held until every other thread waits for
    it, either at the lock or inside a loader of its own (which a LazyModel without its lock, or one that does not
    look again once it holds the lock, would let them reach). Then all of them get the one object."""
    calls: list[int] = []
    inside_loader: set[int] = set()
    release = threading.Event()

    def loader() -> object:
        inside_loader.add(threading.get_ident())
        calls.append(1)
        assert release.wait(30), "the test never released the loader"
        return object()

    lazy: LazyModel[object] = LazyModel(loader)
    start = threading.Barrier(THREADS)
    got: list[object] = []

    def ask() -> None:
        start.wait()
        got.append(lazy.get())

    threads = [threading.Thread(target=ask, daemon=True) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while not all(_parked(thread, inside_loader) for thread in threads):
            assert time.monotonic() < deadline, "the threads never all reached get()"
        assert not lazy.loaded
    finally:
        release.set()
        for thread in threads:
            thread.join(30)
    assert len(calls) == 1 and len(got) == THREADS
    assert all(value is got[0] for value in got) and lazy.loaded
    assert lazy.get() is got[0] and len(calls) == 1  # later calls keep it


def test_a_loader_that_raises_keeps_nothing_and_is_called_again() -> None:
    outcomes: list[Exception | str] = [OSError("weights not readable yet"), "model"]
    calls: list[int] = []

    def loader() -> str:
        calls.append(1)
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    lazy = LazyModel(loader)
    with pytest.raises(OSError, match="weights not readable yet"):
        lazy.get()
    assert not lazy.loaded and len(calls) == 1
    assert lazy.get() == "model" and lazy.loaded and len(calls) == 2
    assert lazy.get() == "model" and len(calls) == 2


def test_a_loader_that_returns_none_is_loaded_once() -> None:
    calls: list[int] = []

    def loader() -> None:
        calls.append(1)

    lazy = LazyModel(loader)
    assert lazy.get() is None and lazy.get() is None
    assert lazy.loaded and len(calls) == 1


def test_required_path_messages_name_the_provider_option_value_and_fix(tmp_path: Path) -> None:
    what = "a NISQA checkpoint (nisqa.tar)"
    for missing in (None, ""):
        with pytest.raises(ValueError) as refused:
            required_path("nisqa", "weights", missing, what=what, example="/path/nisqa.tar")
        assert str(refused.value) == (
            "nisqa needs a NISQA checkpoint (nisqa.tar); it never downloads one: nisqa:weights=/path/nisqa.tar"
        )
    absent = str(tmp_path / "absent.tar")
    with pytest.raises(ValueError) as refused:
        required_path("nisqa", "weights", absent, what=what, example="/path/nisqa.tar")
    assert str(refused.value) == (
        f"nisqa weights={absent!r}: no such file; give the path of a NISQA checkpoint (nisqa.tar)"
    )
    with pytest.raises(ValueError, match="no such file"):  # a folder is not the file asked for
        required_path("nisqa", "weights", str(tmp_path), what=what, example="/path/nisqa.tar")
    (tmp_path / "nisqa.tar").write_bytes(b"")
    assert (
        required_path("nisqa", "weights", str(tmp_path / "nisqa.tar"), what=what, example="/path/nisqa.tar")
        == tmp_path / "nisqa.tar"
    )


def test_required_path_of_a_folder_checks_its_marker_files(tmp_path: Path) -> None:
    def folder(value: str) -> Path:
        return required_path(
            "speechbrain-lid",
            "model",
            value,
            folder=True,
            markers=("a.ckpt", "b.txt"),
            what="the folder of lang-id's files",
            example="/path/lang-id",
        )

    with pytest.raises(ValueError) as refused:
        folder(str(tmp_path / "none"))
    assert str(refused.value) == (
        f"speechbrain-lid model={str(tmp_path / 'none')!r}: no such folder; give the path "
        "of the folder of lang-id's files"
    )
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ValueError, match="no such folder"):
        folder(str(tmp_path / "file"))
    with pytest.raises(ValueError) as refused:
        folder(str(tmp_path))
    assert str(refused.value) == (
        f"speechbrain-lid model={str(tmp_path)!r}: no a.ckpt, b.txt in that folder; give "
        "the path of the folder of lang-id's files"
    )
    (tmp_path / "a.ckpt").write_bytes(b"")
    with pytest.raises(ValueError, match=r"no b\.txt in that folder"):
        folder(str(tmp_path))
    (tmp_path / "b.txt").write_bytes(b"")
    assert folder(str(tmp_path)) == tmp_path


def test_required_path_expands_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "utmos.pt").write_bytes(b"")
    assert required_path("utmos22", "weights", "~/utmos.pt", what="its weights", example="/p") == tmp_path / "utmos.pt"


def test_refuse_model_name_and_model_source() -> None:
    refuse_model_name("dnsmos", None, instead="options: personalized")
    refuse_model_name("dnsmos", "", instead="options: personalized")
    with pytest.raises(ValueError) as refused:
        refuse_model_name("dnsmos", "big", instead="options: personalized")
    assert str(refused.value) == "dnsmos takes no model name (got 'big'); options: personalized"

    assert model_source("transformers", "voice/dir", None) == "voice/dir"
    assert model_source("transformers", "voice/dir", "option/dir") == "option/dir"  # model= wins: paths with ':'
    with pytest.raises(ValueError) as refused:
        model_source("transformers", None, None)
    assert str(refused.value) == "transformers needs a model: transformers:<local dir or hub id> or model=PATH"
