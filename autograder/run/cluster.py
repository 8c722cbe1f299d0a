"""Which Dask schedulers the grader talks to, and how: mutual TLS, or plain TCP on loopback.

Dask runs whatever function it is sent: anyone who can reach a scheduler that accepts plain
TCP can run code on its workers, outside every jail, as the workers' user, next to the course's
solutions and the grader. So `--scheduler` must be a `tls://` address, with the CA and a client
certificate and key (options, or Dask's configuration: `distributed.comm.tls.ca-file`,
`distributed.comm.tls.client.cert`, `distributed.comm.tls.client.key`); Dask then checks the
scheduler's certificate against the CA and the scheduler checks the grader's (mutual TLS).
A plain address is accepted only on loopback (this machine: no one else can connect), or with
`--insecure-plain-tcp`, whose name says what it is.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENCRYPTED = ("tls", "wss")  # Dask's protocols that use TLS
CONFIG = {  # option -> Dask's configuration key
    "ca": "distributed.comm.tls.ca-file",
    "cert": "distributed.comm.tls.client.cert",
    "key": "distributed.comm.tls.client.key",
}
INSECURE_FLAG = "--insecure-plain-tcp"


class ClusterRefused(ValueError):
    """The scheduler address or its certificates are not acceptable (one line: why)."""


@dataclass(frozen=True)
class TLSFiles:
    """The grading process's side of mutual TLS: the CA, its certificate and its key."""

    ca: Path
    cert: Path
    key: Path

    def security(self) -> Any:
        """Dask's Security for a client of the cluster (encryption required)."""
        from distributed.security import Security

        return Security(
            require_encryption=True,
            tls_ca_file=str(self.ca),
            tls_client_cert=str(self.cert),
            tls_client_key=str(self.key),
        )


def split(address: str) -> tuple[str, str]:
    """(protocol, host) of a Dask address; Dask's default protocol is tcp."""
    protocol, _, rest = address.rpartition("://")
    protocol = protocol or "tcp"
    host = rest.rsplit(":", 1)[0] if rest.count(":") == 1 or rest.startswith("[") else rest
    return protocol.lower(), host.strip("[]")


def on_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check(
    address: str,
    ca: Path | None = None,
    cert: Path | None = None,
    key: Path | None = None,
    insecure: bool = False,
) -> TLSFiles | None:
    """The TLS files to connect to `address` with (None: plain TCP, on loopback or allowed by
    `insecure`); raises ClusterRefused, one line of why and what to do."""
    protocol, host = split(address)
    if protocol in ENCRYPTED:
        return tls_files(ca, cert, key)
    if any(v is not None for v in (ca, cert, key)):
        raise ClusterRefused(f"--tls-* options given for a {protocol}:// scheduler: use tls://")
    if on_loopback(host) or insecure:
        return None
    raise ClusterRefused(
        f"--scheduler {address} is plain {protocol}: anyone who can reach it can run code on "
        "the workers, outside the jail. Use a tls:// scheduler with certificates (README: "
        f"Grading on more than one machine), or add {INSECURE_FLAG} if this network is yours "
        "alone"
    )


def tls_files(ca: Path | None, cert: Path | None, key: Path | None) -> TLSFiles:
    """The options given, else Dask's configuration; each file must be there."""
    import dask

    given = {"ca": ca, "cert": cert, "key": key}
    found: dict[str, Path] = {}
    for name, value in given.items():
        configured = dask.config.get(CONFIG[name], None)
        path = value if value is not None else (Path(configured) if configured else None)
        if path is None:
            raise ClusterRefused(
                f"a tls:// scheduler needs --tls-{name} (or {CONFIG[name]} in Dask's configuration)"
            )
        if not path.is_file():
            raise ClusterRefused(f"--tls-{name} {path}: no such file")
        found[name] = path.resolve()
    return TLSFiles(**found)
