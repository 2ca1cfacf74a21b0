"""A TLS certificate for tests of https: made with openssl, for 127.0.0.1 only."""

from __future__ import annotations

import subprocess
from pathlib import Path


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (it is its own CA) and its key, made with openssl."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key
