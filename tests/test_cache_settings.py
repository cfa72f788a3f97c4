"""Issue 6 points 1 and 6: where the cache lives, the switches, the source dump; and the
sizes the CLI reads."""
import io
from pathlib import Path

import pytest

from querycompute.cache import format_size, parse_size, settings


def test_cache_dir_variable_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("QUERYCOMPUTE_CACHE_DIR", str(tmp_path / "mine"))
    assert settings.cache_directory() == tmp_path / "mine"


@pytest.mark.parametrize("platform, env, expected", [
    ("linux", {"XDG_CACHE_HOME": "/xdg"}, Path("/xdg/querycompute")),
    ("linux", {"XDG_CACHE_HOME": "relative/ignored"}, Path.home() / ".cache" / "querycompute"),
    ("linux", {}, Path.home() / ".cache" / "querycompute"),
    ("darwin", {"XDG_CACHE_HOME": "/xdg"}, Path.home() / "Library" / "Caches" / "querycompute"),
    ("win32", {"LOCALAPPDATA": "/appdata"}, Path("/appdata/querycompute")),
])
def test_platform_default_directories(monkeypatch, platform, env, expected):
    for name in ("QUERYCOMPUTE_CACHE_DIR", "XDG_CACHE_HOME", "LOCALAPPDATA"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(settings.sys, "platform", platform)
    assert settings.cache_directory() == expected


@pytest.mark.parametrize("value, enabled", [
    (None, True), ("", True), ("1", True), ("yes", True),
    ("0", False), ("false", False), ("OFF", False), (" no ", False),
])
def test_cache_switch(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("QUERYCOMPUTE_CACHE", raising=False)
    else:
        monkeypatch.setenv("QUERYCOMPUTE_CACHE", value)
    assert settings.disk_cache_enabled() is enabled


def test_dump_source_prints_only_when_switched_on(monkeypatch):
    out = io.StringIO()
    monkeypatch.delenv("QUERYCOMPUTE_DUMP_SOURCE", raising=False)
    settings.dump_source("qc_sum", "opencl", "__kernel void qc_sum() {}", stream=out)
    assert out.getvalue() == ""
    monkeypatch.setenv("QUERYCOMPUTE_DUMP_SOURCE", "1")
    settings.dump_source("qc_sum", "opencl", "__kernel void qc_sum() {}", stream=out)
    assert "opencl kernel qc_sum" in out.getvalue()
    assert out.getvalue().endswith("__kernel void qc_sum() {}\n")


@pytest.mark.parametrize("text, n", [
    ("0", 0), ("1000000", 1_000_000), ("500MB", 500_000_000), ("500 mb", 500_000_000),
    ("2GB", 2_000_000_000), ("1.5GiB", 1_610_612_736), ("512KiB", 524_288), ("10k", 10_000),
])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "MB", "-5MB", "5 parsecs", "1e9"])
def test_parse_size_refuses_nonsense_and_says_how_to_write_it(text):
    with pytest.raises(ValueError, match="e.g. 500MB"):
        parse_size(text)


def test_format_size():
    assert [format_size(n) for n in (0, 999, 1234, 5_600_000, 7_000_000_000)] == [
        "0 B", "999 B", "1.2 KB", "5.6 MB", "7.0 GB"]
