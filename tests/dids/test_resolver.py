"""DID resolution: did:key, did:web over real loopback HTTPS, the SSRF guard, authorisation."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

from app.dids.did_key import resolve_did_key
from app.dids.did_web import DidWebResolver, did_web_location
from app.dids.errors import DidResolutionFailed
from app.dids.resolver import DidResolver, resolve_verification_method
from app.dids.verification_methods import key_from_verification_method
from app.multiformats import encode_multikey
from app.outbound import OutboundPolicy, is_public_address
from tests.support.vectors import VECTORS

ED25519_DID = "did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2"
P256_DID = "did:key:zDnaepBuvsQ8cpsWrVKw8fbpGpvPeNSjVPTWoq6cRqaYzBKVP"
P384_DID = "did:key:z82LkuBieyGShVBhvtE2zoiD6Kma4tJGFtkAhxR5pfkp5QPw4LutoYWhvQCnGjdVn14kujQ"


def _vm(did: str) -> str:
    return f"{did}#{did.removeprefix('did:key:')}"


def _code(operation) -> str:
    with pytest.raises(DidResolutionFailed) as failure:
        operation()
    return failure.value.code


# --- did:key ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("did", "key_type", "length"), [(ED25519_DID, "Ed25519", 32), (P256_DID, "P-256", 33), (P384_DID, "P-384", 49)]
)
def test_did_key_resolves_for_every_purpose_but_key_agreement(did: str, key_type: str, length: int) -> None:
    resolver = DidResolver()
    for purpose in ("assertionMethod", "authentication", "capabilityInvocation", "capabilityDelegation"):
        key = resolver.resolve_verification_method(_vm(did), purpose, controller=did)
        assert (key.key_type, len(key.public_key), key.controller, key.id) == (key_type, length, did, _vm(did))
    assert _code(lambda: resolver.resolve_verification_method(_vm(did), "keyAgreement")) == (
        "verification_method_not_authorized"
    )


def test_did_key_for_a_bls12_381_g2_key() -> None:
    material = json.loads((VECTORS / "bbs-2023/BBSKeyMaterial.json").read_text())
    public_key = bytes.fromhex(material["publicKeyHex"])
    identifier = encode_multikey("Bls12381G2", public_key)
    assert identifier.startswith("zUC7")
    did = f"did:key:{identifier}"
    key = resolve_verification_method(f"{did}#{identifier}", "assertionMethod", controller=did)
    assert key.key_type == "Bls12381G2" and key.public_key == public_key


@pytest.mark.parametrize(
    "did",
    [
        "did:key:",
        "did:key:6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2",  # no multibase prefix
        "did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ",  # truncated key
        "did:key:z0000",  # not base58
        "did:key:" + encode_multikey("P-256", b"\x05" + bytes(32)),  # not a point
        "did:key:" + "z" + "2" * 60,  # unknown multicodec
    ],
)
def test_malformed_did_key_fails_resolution(did: str) -> None:
    assert _code(lambda: resolve_did_key(did)) == "did_resolution_failed"
    assert _code(lambda: DidResolver().resolve_verification_method(f"{did}#x", "assertionMethod")) == (
        "did_resolution_failed"
    )


def test_wrong_fragment_or_issuer_is_refused() -> None:
    resolver = DidResolver()
    assert _code(lambda: resolver.resolve_verification_method(f"{ED25519_DID}#other", "assertionMethod")) == (
        "verification_method_not_found"
    )
    assert _code(lambda: resolver.resolve_verification_method(ED25519_DID, "assertionMethod")) == (
        "verification_method_not_found"
    )
    assert _code(
        lambda: resolver.resolve_verification_method(_vm(ED25519_DID), "assertionMethod", controller=P256_DID)
    ) == ("verification_method_not_authorized")


@pytest.mark.parametrize("value", ["https://example.com/keys/1", "did:", "did:key", "", None, 7])
def test_non_did_verification_methods_fail(value) -> None:
    assert _code(lambda: DidResolver().resolve_verification_method(value, "assertionMethod")) == (
        "did_resolution_failed"
    )


# --- DID documents from the network's own source ---------------------------------------------


def _ed25519_public() -> bytes:
    return (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def _document(did: str, method: dict, **relationships: list) -> dict:
    return {"id": did, "verificationMethod": [method], **relationships}


def test_network_dids_come_from_the_local_source_first() -> None:
    did = "did:web:agents.tessera.example:a:1"
    public_key = _ed25519_public()
    method = {
        "id": f"{did}#k",
        "type": "Multikey",
        "controller": did,
        "publicKeyMultibase": encode_multikey("Ed25519", public_key),
    }
    calls: list[str] = []

    def local(requested: str) -> dict | None:
        calls.append(requested)
        return _document(did, method, assertionMethod=["#k"]) if requested == did else None

    resolver = DidResolver(local_documents=local, web=_refusing_web())
    key = resolver.resolve_verification_method(f"{did}#k", "assertionMethod", controller=did)
    assert key.public_key == public_key and calls == [did]
    assert _code(lambda: resolver.resolve_verification_method(f"{did}#k", "authentication")) == (
        "verification_method_not_authorized"
    )
    assert resolver.resolve_verification_method(_vm(ED25519_DID), "assertionMethod").key_type == "Ed25519"


def _refusing_web() -> DidWebResolver:
    def no_dns(host: str, port: int) -> list[str]:
        raise AssertionError(f"unexpected DNS lookup of {host}")

    return DidWebResolver(OutboundPolicy(resolve_addresses=no_dns))


def test_controller_must_be_the_did_itself() -> None:
    did = "did:example:issuer"
    method = {
        "id": f"{did}#k",
        "type": "Multikey",
        "controller": "did:example:someone-else",
        "publicKeyMultibase": encode_multikey("Ed25519", _ed25519_public()),
    }
    resolver = DidResolver(local_documents=lambda _: _document(did, method, assertionMethod=[f"{did}#k"]))
    assert _code(lambda: resolver.resolve_verification_method(f"{did}#k", "assertionMethod")) == (
        "verification_method_not_authorized"
    )


def test_embedded_methods_and_document_id_checks() -> None:
    did = "did:example:embedded"
    public_key = _ed25519_public()
    embedded = {
        "id": f"{did}#e",
        "type": "Multikey",
        "controller": did,
        "publicKeyMultibase": encode_multikey("Ed25519", public_key),
    }
    resolver = DidResolver(local_documents=lambda _: {"id": did, "assertionMethod": [embedded]})
    assert resolver.resolve_verification_method(f"{did}#e", "assertionMethod").public_key == public_key
    wrong_id = DidResolver(local_documents=lambda _: {"id": "did:example:other", "assertionMethod": [embedded]})
    assert _code(lambda: wrong_id.resolve_verification_method(f"{did}#e", "assertionMethod")) == "did_resolution_failed"
    unsupported = DidResolver()
    assert _code(lambda: unsupported.resolve_verification_method(f"{did}#e", "assertionMethod")) == (
        "did_resolution_failed"
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_json_web_keys_are_read() -> None:
    public_ed = _ed25519_public()
    method = {
        "id": "did:example:a#1",
        "type": "JsonWebKey",
        "controller": "did:example:a",
        "publicKeyJwk": {"kty": "OKP", "crv": "Ed25519", "x": _b64(public_ed)},
    }
    assert key_from_verification_method(method, "did:example:a#1").public_key == public_ed
    p256 = ec.generate_private_key(ec.SECP256R1()).public_key()
    numbers = p256.public_numbers()
    method = {
        "id": "did:example:a#2",
        "type": "JsonWebKey2020",
        "controller": "did:example:a",
        "publicKeyJwk": {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64(numbers.x.to_bytes(32, "big")),
            "y": _b64(numbers.y.to_bytes(32, "big")),
        },
    }
    compressed = p256.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)
    assert key_from_verification_method(method, "did:example:a#2").public_key == compressed
    method["publicKeyJwk"]["d"] = _b64(b"\x01" * 32)
    assert _code(lambda: key_from_verification_method(method, "did:example:a#2")) == "did_resolution_failed"
    method = {
        "id": "did:example:a#3",
        "type": "RsaVerificationKey2018",
        "controller": "did:example:a",
        "publicKeyPem": "x",
    }
    assert _code(lambda: key_from_verification_method(method, "did:example:a#3")) == "did_resolution_failed"


# --- did:web ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("did", "url"),
    [
        ("did:web:w3c-ccg.github.io", "https://w3c-ccg.github.io/.well-known/did.json"),
        ("did:web:w3c-ccg.github.io:user:alice", "https://w3c-ccg.github.io/user/alice/did.json"),
        ("did:web:example.com%3A3000:user:alice", "https://example.com:3000/user/alice/did.json"),
        ("did:web:Example.COM", "https://example.com/.well-known/did.json"),
    ],
)
def test_did_web_locations(did: str, url: str) -> None:
    assert did_web_location(did).url == url


@pytest.mark.parametrize(
    "did",
    [
        "did:web:",
        "did:web:user@host",
        "did:web:host%2Fpath",
        "did:web:host%3A99999",
        "did:web:host::x",
        "did:web:host:..",
        "did:web:[::1]",
    ],
)
def test_malformed_did_web_is_refused(did: str) -> None:
    assert _code(lambda: did_web_location(did)) == "did_resolution_failed"


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "2002:7f00:1::1",
        "::",
        "not-an-ip",
    ],
)
def test_non_public_addresses_are_recognised(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert is_public_address(address)


class ConnectionCounter:
    """A loopback TCP listener that counts every connection made to it."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.socket.settimeout(0.1)
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@pytest.fixture
def counter() -> Iterator[ConnectionCounter]:
    listener = ConnectionCounter()
    yield listener
    listener.close()


def test_counter_sees_connections(counter: ConnectionCounter) -> None:
    socket.create_connection(("127.0.0.1", counter.port)).close()
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=2)
    while counter.connections == 0 and datetime.datetime.now() < deadline:
        threading.Event().wait(0.01)
    assert counter.connections == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_did_web_to_loopback_is_refused_without_connecting(counter: ConnectionCounter, host: str) -> None:
    did = f"did:web:{host}%3A{counter.port}"
    resolver = DidResolver()
    with pytest.raises(DidResolutionFailed) as failure:
        resolver.resolve_verification_method(f"{did}#key-1", "assertionMethod", controller=did)
    assert failure.value.code == "did_resolution_failed" and "non-public address" in failure.value.detail
    threading.Event().wait(0.3)
    assert counter.connections == 0


@pytest.mark.parametrize("addresses", [["10.0.0.7"], ["93.184.215.14", "169.254.169.254"], ["::ffff:127.0.0.1"]])
def test_host_resolving_to_any_private_address_is_refused(counter: ConnectionCounter, addresses: list[str]) -> None:
    web = DidWebResolver(OutboundPolicy(resolve_addresses=lambda host, port: addresses))
    assert _code(lambda: web("did:web:innocent.example")) == "did_resolution_failed"
    assert counter.connections == 0


# --- a real HTTPS server for did:web ----------------------------------------------------------


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "did-web-test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("did.example"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class DidWebServer:
    """HTTPS on 127.0.0.1 serving `routes` (path → (status, headers, body)); records Host headers."""

    def __init__(self, tmp_path: Path) -> None:
        self.cert_path, key_path = _certificate(tmp_path)
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.hosts: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hosts.append(self.headers.get("Host", ""))
                status, headers, body = server.routes.get(self.path, (404, {}, b"not found"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_path, key_path)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def resolver(self, host: str = "localhost", **settings) -> DidWebResolver:
        settings.setdefault("verify", ssl.create_default_context(cafile=str(self.cert_path)))
        return DidWebResolver(
            OutboundPolicy(
                allowed_private_hosts=frozenset({f"{host}:{self.port}"}),
                resolve_addresses=lambda name, port: ["127.0.0.1"],
                **settings,
            )
        )

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[DidWebServer]:
    server = DidWebServer(tmp_path)
    yield server
    server.close()


def _web_document(did: str, public_key: bytes) -> dict:
    return {
        "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
        "id": did,
        "verificationMethod": [
            {
                "id": f"{did}#key-1",
                "type": "Multikey",
                "controller": did,
                "publicKeyMultibase": encode_multikey("Ed25519", public_key),
            }
        ],
        "assertionMethod": ["#key-1"],
    }


def test_allow_listed_did_web_resolves_over_https(web_server: DidWebServer) -> None:
    did = f"did:web:localhost%3A{web_server.port}:issuers:1"
    public_key = _ed25519_public()
    web_server.routes["/issuers/1/did.json"] = (
        200,
        {"Content-Type": "application/json"},
        json.dumps(_web_document(did, public_key)).encode(),
    )
    resolver = DidResolver(web=web_server.resolver())
    key = resolver.resolve_verification_method(f"{did}#key-1", "assertionMethod", controller=did)
    assert key.public_key == public_key
    assert web_server.hosts == [f"localhost:{web_server.port}"]
    resolver.resolve_verification_method(f"{did}#key-1", "assertionMethod", controller=did)
    assert len(web_server.hosts) == 1  # cached


def test_did_web_accepts_a_ca_bundle_path(web_server: DidWebServer) -> None:
    did = f"did:web:localhost%3A{web_server.port}"
    web_server.routes["/.well-known/did.json"] = (200, {}, json.dumps(_web_document(did, _ed25519_public())).encode())
    assert web_server.resolver(verify=str(web_server.cert_path))(did)["id"] == did
    assert _code(lambda: web_server.resolver(verify=True)(did)) == "did_resolution_failed"


def test_did_web_connects_to_the_checked_address_with_the_did_host_name(web_server: DidWebServer) -> None:
    did = f"did:web:did.example%3A{web_server.port}"
    web_server.routes["/.well-known/did.json"] = (200, {}, json.dumps(_web_document(did, _ed25519_public())).encode())
    document = web_server.resolver(host="did.example")(did)
    assert document["id"] == did and web_server.hosts == [f"did.example:{web_server.port}"]


def test_did_web_needs_a_certificate_for_its_host(web_server: DidWebServer) -> None:
    did = f"did:web:unlisted.example%3A{web_server.port}"
    web_server.routes["/.well-known/did.json"] = (200, {}, json.dumps(_web_document(did, _ed25519_public())).encode())
    with pytest.raises(DidResolutionFailed) as failure:
        web_server.resolver(host="unlisted.example")(did)
    assert failure.value.code == "did_resolution_failed" and "certificate" in failure.value.detail


@pytest.mark.parametrize(
    ("status", "headers", "body", "settings"),
    [
        (302, {"Location": "https://127.0.0.1/elsewhere"}, b"", {}),
        (500, {}, b"oops", {}),
        (200, {}, b"{not json", {}),
        (200, {}, b"[1, 2]", {}),
        (200, {}, json.dumps({"id": "did:web:someone.else"}).encode(), {}),
        (200, {}, b" " * 5000 + b"{}", {"max_bytes": 4096}),
    ],
    ids=["redirect", "server-error", "not-json", "not-object", "other-id", "too-large"],
)
def test_bad_did_web_answers_fail(web_server: DidWebServer, status, headers, body, settings) -> None:
    did = f"did:web:localhost%3A{web_server.port}"
    web_server.routes["/.well-known/did.json"] = (status, headers, body)
    assert _code(lambda: web_server.resolver(**settings)(did)) == "did_resolution_failed"
    assert len(web_server.hosts) == 1


def test_a_did_web_document_holding_a_lone_surrogate_is_not_json(web_server: DidWebServer) -> None:
    did = f"did:web:localhost%3A{web_server.port}"
    document = {**_web_document(did, _ed25519_public()), "alsoKnownAs": ["MARKER"]}
    body = json.dumps(document).replace('"MARKER"', '"a\\ud800b"').encode()
    web_server.routes["/.well-known/did.json"] = (200, {}, body)
    with pytest.raises(DidResolutionFailed) as failure:
        web_server.resolver()(did)
    assert (failure.value.code, failure.value.detail) == ("did_resolution_failed", "did:web document is not JSON")


def test_did_web_without_a_listener_fails_cleanly(counter: ConnectionCounter) -> None:
    port = counter.port
    counter.close()
    web = DidWebResolver(
        OutboundPolicy(
            allowed_private_hosts=frozenset({f"localhost:{port}"}),
            resolve_addresses=lambda host, p: ["127.0.0.1"],
            connect_timeout=1,
        )
    )
    assert _code(lambda: web(f"did:web:localhost%3A{port}")) == "did_resolution_failed"
