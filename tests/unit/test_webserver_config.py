"""nginx configuration, objects and stub_status parsing (no root)."""

from pathlib import Path

import pytest

from fwlab.errors import RunnerError
from fwlab.testbed.webserver import object_bytes, parse_stub_status, render_nginx_conf, write_objects


def test_conf_keeps_everything_in_its_prefix():
    text = render_nginx_conf(Path("/tmp/p"), Path("/tmp/p/www"))
    assert "pid /tmp/p/nginx.pid;" in text and "error_log /tmp/p/error.log" in text
    assert "root /tmp/p/www;" in text and "daemon off;" in text and "access_log off;" in text
    assert "/var/" not in text and "/etc/" not in text
    assert "listen 80 reuseport" in text and "listen [::]:80" in text and "stub_status" in text


def test_objects_are_seeded_and_sized(tmp_path):
    write_objects(tmp_path, [1000, 64000], seed=1)
    assert (tmp_path / "obj" / "1000.bin").stat().st_size == 1000
    assert (tmp_path / "obj" / "64000.bin").read_bytes() == object_bytes(64000, 1)
    assert object_bytes(1000, 1) != object_bytes(1000, 2)


def test_stub_status():
    text = "Active connections: 3 \nserver accepts handled requests\n 10 10 12 \nReading: 0 Writing: 1 Waiting: 0 \n"
    assert parse_stub_status(text) == {"active": 3, "accepts": 10, "handled": 10, "requests": 12}
    with pytest.raises(RunnerError):
        parse_stub_status("<html>404</html>")
