import pytest


@pytest.fixture(autouse=True)
def _isolated_calibration_cache(tmp_path, monkeypatch):
    """No test sees a calibration cached on this machine."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg_cache"))
