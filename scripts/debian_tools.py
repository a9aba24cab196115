"""Fetch the Debian packages `tools.lock` pins for this machine's architecture, check each
against its SHA-256 sum and unpack it under a folder (`make test` uses `.tools/`): the checkers
the tests run, never installed system-wide.

Each package lands in <folder>/<package>/ (its binaries in usr/bin/), with a `.pinned` file naming
the version and sum it came from, so a changed pin fetches again and an unchanged one does nothing.
Exit 1, naming the package and what went wrong, when a download fails or its sum differs.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MIRROR = "https://deb.debian.org/debian/"
# Debian's names for what platform.machine() reports.
ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass(frozen=True)
class Pin:
    package: str
    version: str
    arch: str
    path: str  # under the mirror's root
    sha256: str


def read_lock(text: str) -> list[Pin]:
    pins = []
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 5 or len(fields[4]) != 64:
            raise SystemExit(f"tools.lock line {n}: expected `package version arch pool-path sha256`, "
                             f"got {line.strip()!r}")
        pins.append(Pin(*fields))
    return pins


def _download(url: str, to: Path) -> None:
    last: Exception | None = None
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=120) as got, to.open("wb") as out:
                shutil.copyfileobj(got, out)
            return
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise SystemExit(f"{url}: 404, Debian no longer serves this version (see tools.lock's "
                                 f"header for how to pin the current one)") from e
            last = e
        except OSError as e:
            last = e
    raise SystemExit(f"{url}: download failed: {last}")


def fetch(pin: Pin, into: Path, mirror: str = MIRROR) -> Path:
    """The folder `pin` is unpacked in, fetched and unpacked unless it already holds that pin."""
    dest = into / pin.package
    stamp = f"{pin.version} {pin.sha256}\n"
    if (dest / ".pinned").is_file() and (dest / ".pinned").read_text() == stamp:
        return dest
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=into) as scratch:
        deb = Path(scratch) / Path(pin.path).name
        _download(mirror + pin.path, deb)
        digest = hashlib.sha256(deb.read_bytes()).hexdigest()
        if digest != pin.sha256:
            raise SystemExit(f"{pin.package} {pin.version}: SHA-256 {digest}, tools.lock pins {pin.sha256}")
        unpacked = Path(scratch) / "root"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        (unpacked / ".pinned").write_text(stamp)
        shutil.rmtree(dest, ignore_errors=True)
        unpacked.rename(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lock", type=Path, default=Path("tools.lock"))
    ap.add_argument("--into", type=Path, default=Path(".tools"))
    args = ap.parse_args(argv)
    arch = ARCH.get(platform.machine().lower())
    pins = [p for p in read_lock(args.lock.read_text()) if p.arch == arch]
    if not pins:
        print(f"tools.lock pins nothing for this machine ({platform.machine()}): "
              f"add its Debian architecture's lines", file=sys.stderr)
        return 1
    for pin in pins:
        print(f"{pin.package} {pin.version}: {fetch(pin, args.into)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
