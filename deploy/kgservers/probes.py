"""Readiness probes: port check, minimal CQL (native protocol v4) and Bolt 4.4 clients, HTTP helpers."""

from __future__ import annotations

import json
import socket
import struct
import urllib.error
import urllib.request

from .config import HOST


def port_open(port: int, timeout: float = 1.0) -> bool:
    """True if something accepts TCP connections on HOST:port."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def cql_release_version(port: int, timeout: float = 5.0) -> str:
    """Run `SELECT release_version FROM system.local` over CQL native protocol v4."""

    def frame(stream: int, opcode: int, body: bytes) -> bytes:
        return struct.pack(">BBhBi", 0x04, 0, stream, opcode, len(body)) + body

    def string(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">H", len(b)) + b

    def read_frame(sock):
        _ver, _flags, _stream, opcode, length = struct.unpack(">BBhBi", _recv_exact(sock, 9))
        return opcode, _recv_exact(sock, length)

    def read_string(body: bytes, pos: int):
        (n,) = struct.unpack_from(">H", body, pos)
        return body[pos + 2 : pos + 2 + n].decode(), pos + 2 + n

    def error_text(body: bytes) -> str:
        code = struct.unpack_from(">i", body, 0)[0]
        return f"CQL error 0x{code:04x}: {read_string(body, 4)[0]}"

    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame(1, 0x01, struct.pack(">H", 1) + string("CQL_VERSION") + string("3.0.0")))
        opcode, body = read_frame(sock)
        if opcode != 0x02:  # READY
            raise ConnectionError(error_text(body) if opcode == 0 else f"unexpected opcode {opcode}")
        query = b"SELECT release_version FROM system.local"
        sock.sendall(frame(2, 0x07, struct.pack(">i", len(query)) + query + struct.pack(">HB", 0x0001, 0)))
        opcode, body = read_frame(sock)
        if opcode == 0x00:
            raise ConnectionError(error_text(body))
        kind, flags, ncols = struct.unpack_from(">iii", body, 0)
        if opcode != 0x08 or kind != 2 or ncols != 1:
            raise ConnectionError(f"unexpected CQL result opcode={opcode} kind={kind}")
        pos = 12
        if flags & 0x0002:  # paging state
            (n,) = struct.unpack_from(">i", body, pos)
            pos += 4 + max(n, 0)
        if flags & 0x0001:  # global table spec
            _, pos = read_string(body, pos)
            _, pos = read_string(body, pos)
        else:
            _, pos = read_string(body, pos)
            _, pos = read_string(body, pos)
        _, pos = read_string(body, pos)  # column name
        pos += 2  # type id (varchar)
        (nrows,) = struct.unpack_from(">i", body, pos)
        pos += 4
        if nrows < 1:
            raise ConnectionError("system.local returned no rows")
        (n,) = struct.unpack_from(">i", body, pos)
        return body[pos + 4 : pos + 4 + n].decode()


def _ps_string(s: str) -> bytes:
    b = s.encode()
    if len(b) < 16:
        return bytes([0x80 + len(b)]) + b
    if len(b) < 256:
        return bytes([0xD0, len(b)]) + b
    return bytes([0xD1]) + struct.pack(">H", len(b)) + b


def _ps_map(d: dict) -> bytes:
    out = bytes([0xA0 + len(d)])
    for k, v in d.items():
        out += _ps_string(k)
        if isinstance(v, str):
            out += _ps_string(v)
        elif isinstance(v, int) and -16 <= v < 128:
            out += struct.pack(">b", v)
        else:
            raise TypeError(v)
    return out


def bolt_return_1(port: int, database: str = "neo4j", timeout: float = 5.0) -> None:
    """Run `RETURN 1` over Bolt 4.4 (no auth) and check the record is [1]."""

    def send(sock, signature: int, *fields: bytes) -> None:
        msg = bytes([0xB0 + len(fields), signature]) + b"".join(fields)
        sock.sendall(struct.pack(">H", len(msg)) + msg + b"\x00\x00")

    def recv(sock) -> bytes:
        msg = b""
        while True:
            (n,) = struct.unpack(">H", _recv_exact(sock, 2))
            if n == 0:
                if msg:
                    return msg
                continue  # NOOP keep-alive chunk
            msg += _recv_exact(sock, n)

    def expect_success(sock, what: str) -> None:
        msg = recv(sock)
        if msg[1] != 0x70:
            raise ConnectionError(f"Bolt {what} failed: {msg[2:].decode(errors='replace')[:300]}")

    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(b"\x60\x60\xb0\x17" + bytes([0, 0, 4, 4]) + bytes(12))
        version = _recv_exact(sock, 4)
        if version != bytes([0, 0, 4, 4]):
            raise ConnectionError(f"Bolt 4.4 not negotiated: {version.hex()}")
        send(sock, 0x01, _ps_map({"user_agent": "kgflow-servers/1", "scheme": "none"}))
        expect_success(sock, "HELLO")
        send(sock, 0x10, _ps_string("RETURN 1 AS x"), _ps_map({}), _ps_map({"db": database}))
        expect_success(sock, "RUN")
        send(sock, 0x3F, _ps_map({"n": -1}))
        record = recv(sock)
        if record[:4] != bytes([0xB1, 0x71, 0x91, 0x01]):
            raise ConnectionError(f"Bolt RETURN 1 gave {record.hex()}")
        expect_success(sock, "PULL")


def http_get(url: str, timeout: float = 3.0) -> str:
    """GET url and return the body as text."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


def http_put_json(url: str, payload: object, timeout: float = 10.0) -> int:
    """PUT payload as JSON (None = empty body); the HTTP status, 409 (already exists) counted as success."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method="PUT", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        if e.code == 409:  # already exists
            return e.code
        raise
