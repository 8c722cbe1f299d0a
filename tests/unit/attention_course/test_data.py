"""The tiny Shakespeare loader: the right file, a wrong checksum, a missing file offline."""

from __future__ import annotations

import hashlib
import os
import urllib.error
from pathlib import Path

import pytest

from attention_course import data
from attention_course.errors import CourseError

SHARED = Path(os.environ.get("TINYSHAKESPEARE", "/nonexistent"))


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No env var, an empty project data/ and working directory, and no network."""
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setattr(data, "data_dir", lambda: tmp_path / "data")
    monkeypatch.chdir(tmp_path)

    def offline(*args, **kwargs):
        raise urllib.error.URLError("network unreachable")

    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    return tmp_path


def test_right_file_from_env_loads_with_the_lectures_figures() -> None:
    if not SHARED.is_file():
        if os.environ.get("CI"):
            pytest.fail("CI must provide the data set through $TINYSHAKESPEARE")
        pytest.skip("the data set is not on this machine ($TINYSHAKESPEARE unset)")
    text = data.load_text(download=False)
    assert len(text) == 1_115_394
    assert len(set(text)) == 65
    assert hashlib.sha256(text.encode()).hexdigest() == data.SHA256


def test_file_in_data_dir_is_found_and_checked(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = b"a stand-in corpus"
    (isolated / "data").mkdir()
    (isolated / "data" / data.FILE_NAME).write_bytes(payload)
    with pytest.raises(data.DataUnavailable, match="sha256"):
        data.locate()
    monkeypatch.setattr(data, "SHA256", hashlib.sha256(payload).hexdigest())
    assert data.locate() == isolated / "data" / data.FILE_NAME


def test_wrong_checksum_from_env_is_refused(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = isolated / "bad.txt"
    bad.write_text("To be, or not to be\n")
    monkeypatch.setenv(data.ENV_VAR, str(bad))
    with pytest.raises(data.DataUnavailable) as info:
        data.load_text()
    assert "is not the lecture's tiny Shakespeare" in str(info.value)


def test_missing_file_offline_says_where_to_put_it(isolated: Path) -> None:
    with pytest.raises(data.DataUnavailable) as info:
        data.locate(download=True)
    message = str(info.value)
    assert "Could not download" in message and data.ENV_VAR in message
    assert str(isolated / "data" / data.FILE_NAME) in message
    assert not (isolated / "data" / data.FILE_NAME).exists()


def test_download_with_wrong_checksum_saves_nothing(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class FakeResponse:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self) -> bytes:
            return b"tampered"

    monkeypatch.setattr(data.urllib.request, "urlopen", lambda *a, **k: FakeResponse())
    with pytest.raises(data.DataUnavailable, match="checksum"):
        data.locate()
    assert not (isolated / "data" / data.FILE_NAME).exists()


def test_download_with_right_checksum_is_saved_once(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = b"a stand-in corpus"
    monkeypatch.setattr(data, "SHA256", hashlib.sha256(payload).hexdigest())
    calls = []

    class FakeResponse:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self) -> bytes:
            calls.append(1)
            return payload

    monkeypatch.setattr(data.urllib.request, "urlopen", lambda *a, **k: FakeResponse())
    first = data.locate()
    second = data.locate()
    assert first == second == isolated / "data" / data.FILE_NAME
    assert first.read_bytes() == payload and len(calls) == 1


def test_course_error_renders_without_traceback() -> None:
    err = data.DataUnavailable("first line\nsecond line")
    assert isinstance(err, CourseError)
    assert err._render_traceback_() == ["DataUnavailable: first line", "second line"]
