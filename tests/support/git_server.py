"""A Git smart-HTTP server over TLS (dulwich's WSGI app), for tests of https Git sources.

Its certificate is self-signed for ``localhost``; a host that should trust it
gets ``SSL_CERT_FILE`` pointing at :attr:`GitHttpsServer.certificate`. Besides
the repositories it serves, ``/moved/...`` answers a redirect to another
origin (``127.0.0.1``), which the product must never follow. A second
listener, :meth:`stalled_port`, accepts connections and never answers.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from dulwich.repo import Repo
from dulwich.server import DictBackend
from dulwich.web import WSGIRequestHandlerLogger, WSGIServerLogger, make_server, make_wsgi_chain


class _QuietHandler(WSGIRequestHandlerLogger):
    def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class's name
        pass


class GitHttpsServer:
    def __init__(self, folder: Path, repositories: dict[str, Path]) -> None:
        self.folder = folder
        self.certificate = folder / "cert.pem"
        self._key = folder / "key.pem"
        self._write_certificate()
        backend = DictBackend({f"/{name}": Repo(str(path)) for name, path in repositories.items()})
        self._server = make_server(
            "127.0.0.1",
            0,
            self._with_redirects(make_wsgi_chain(backend)),
            handler_class=_QuietHandler,
            server_class=WSGIServerLogger,
        )
        self._server.socket = self._tls().wrap_socket(self._server.socket, server_side=True)
        self._stalled: list[socket.socket] = []

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}/{path}"

    def start(self) -> GitHttpsServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        for listener in self._stalled:
            listener.close()

    def stalled_port(self) -> int:
        """A port that accepts connections (the kernel does) and never says a word."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self._stalled.append(listener)
        return listener.getsockname()[1]

    def _with_redirects(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def routed(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path.startswith("/moved/"):
                target = f"https://127.0.0.1:{self.port}/{path[len('/moved/') :]}?{environ.get('QUERY_STRING', '')}"
                start_response("302 Found", [("Location", target), ("Content-Length", "0")])
                return [b""]
            return app(environ, start_response)

        return routed

    def _tls(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificate, self._key)
        return context

    def _write_certificate(self) -> None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.UTC)
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        self.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        self._key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
