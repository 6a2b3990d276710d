"""Certificates for TLS tests and benchmarks, made with the ``openssl`` command (no Python package).

:func:`make_pki` writes into a folder a CA, a server certificate for loopback (SAN
``IP:127.0.0.1``, ``DNS:localhost``) and client certificates with the subjects asked for, each as
PEM files: ``NAME.key`` (PKCS#8, unencrypted), ``NAME.crt`` and ``NAME.pem`` (key and certificate
in one file: Kafka's PEM keystore, and kcoord's ``ssl.keystore.location``). EC P-256 keys: a
whole set takes a fraction of a second.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

DAYS = "2"


class OpensslUnavailable(RuntimeError):
    """No ``openssl`` on PATH: the message says so, and a test skips with it."""


@dataclass(frozen=True)
class Pki:
    folder: Path
    ca: Path  # the CA certificate (PEM): every truststore
    server: Path  # server key + certificate (PEM)
    clients: dict[str, Path] = field(default_factory=dict)  # name -> key + certificate (PEM)

    def key(self, name: str) -> Path:
        return self.folder / f"{name}.key"

    def cert(self, name: str) -> Path:
        return self.folder / f"{name}.crt"


def _run(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


def _key(name: str, folder: Path) -> None:
    _run(
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        f"{name}.key",
        cwd=folder,
    )


def _signed(name: str, subject: str, folder: Path, extensions: str) -> Path:
    _key(name, folder)
    _run("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=folder)
    (folder / f"{name}.ext").write_text(extensions)
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-days", DAYS, "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=folder)  # fmt: skip
    bundle = folder / f"{name}.pem"
    bundle.write_text((folder / f"{name}.key").read_text() + (folder / f"{name}.crt").read_text())
    return bundle


def make_pki(folder: Path, clients: dict[str, str] | None = None, ca_name: str = "kcoord test CA") -> Pki:
    """A CA, a loopback server certificate and ``clients`` (name -> subject, openssl's ``/CN=.../O=...``)."""
    if shutil.which("openssl") is None:
        raise OpensslUnavailable("making test certificates needs the openssl command (not on PATH)")
    folder.mkdir(parents=True, exist_ok=True)
    _key("ca", folder)
    _run("req", "-x509", "-new", "-key", "ca.key", "-subj", f"/CN={ca_name}", "-days", DAYS, "-sha256",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
         "-out", "ca.crt", cwd=folder)  # fmt: skip
    server = _signed(
        "server",
        "/CN=localhost/O=kcoord tests",
        folder,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    made = {
        name: _signed(name, subject, folder, "extendedKeyUsage=clientAuth\n")
        for name, subject in (clients or {}).items()
    }
    return Pki(folder, folder / "ca.crt", server, made)
