"""scripts/debian_tools.py, which fetches the checkers tools.lock pins, against a package built
here and served on 127.0.0.1: it unpacks what matches its sum, fetches nothing for a pin already
unpacked, and refuses a wrong sum, a missing version and a malformed lock line in plain words."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from rtip.stackfile import PROJECT_DIR

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (Debian)")


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("debian_tools", PROJECT_DIR / "scripts" / "debian_tools.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


tools = _module()


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """A mirror on 127.0.0.1 holding one package, `hello` 1.0, whose usr/bin/hello prints hi;
    yields its URL, the .deb, and the paths asked of it."""
    root = tmp_path / "mirror"
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text("Package: hello\nVersion: 1.0\nArchitecture: all\n"
                                            "Maintainer: rtip <rtip@invalid>\nDescription: test\n")
    (pkg / "usr" / "bin").mkdir(parents=True)
    (pkg / "usr" / "bin" / "hello").write_text("#!/bin/sh\necho hi\n")
    (pkg / "usr" / "bin" / "hello").chmod(0o755)
    deb = root / "pool" / "main" / "h" / "hello" / "hello_1.0_all.deb"
    deb.parent.mkdir(parents=True)
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(pkg), str(deb)], check=True,
                   capture_output=True)
    asked: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            asked.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", deb, asked
    finally:
        server.shutdown()
        server.server_close()


def _pin(deb: Path, sha: str | None = None) -> object:
    return tools.Pin("hello", "1.0", "amd64", "pool/main/h/hello/hello_1.0_all.deb",
                     sha or hashlib.sha256(deb.read_bytes()).hexdigest())


def test_a_pinned_package_is_unpacked_once(mirror, tmp_path: Path) -> None:
    url, deb, asked = mirror
    into = tmp_path / "tools"
    dest = tools.fetch(_pin(deb), into, url)
    assert dest == into / "hello"
    done = subprocess.run([str(dest / "usr" / "bin" / "hello")], capture_output=True, text=True, check=True)
    assert done.stdout == "hi\n" and len(asked) == 1
    tools.fetch(_pin(deb), into, url)
    assert len(asked) == 1  # the same pin again: nothing fetched
    assert [p.name for p in into.iterdir()] == ["hello"]  # no download or scratch left behind


def test_a_wrong_sum_and_a_missing_version_are_refused(mirror, tmp_path: Path) -> None:
    url, deb, _ = mirror
    with pytest.raises(SystemExit, match=r"hello 1.0: SHA-256 [0-9a-f]{64}, tools.lock pins 0{64}"):
        tools.fetch(_pin(deb, "0" * 64), tmp_path / "tools", url)
    assert not (tmp_path / "tools" / "hello").exists()
    gone = tools.Pin("hello", "0.9", "amd64", "pool/main/h/hello/hello_0.9_all.deb", "0" * 64)
    with pytest.raises(SystemExit, match="404, Debian no longer serves this version"):
        tools.fetch(gone, tmp_path / "tools", url)


def test_the_lock_is_read_and_a_bad_line_named() -> None:
    pins = tools.read_lock((PROJECT_DIR / "tools.lock").read_text())
    wanted = {("promtool", "amd64"), ("prometheus-alertmanager", "amd64")}
    assert {(p.package, p.arch) for p in pins} >= wanted
    assert all(p.path.endswith(f"_{p.version}_{p.arch}.deb") for p in pins)
    with pytest.raises(SystemExit, match=r"tools.lock line 2: expected `package version arch pool-path"):
        tools.read_lock("# header\npromtool 3.5 amd64 pool/x.deb\n")
