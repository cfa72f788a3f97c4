"""The bytes of one cache entry on disk: the binary's header, the metadata JSON, and the
atomic write every file goes through.

Entry directory <root>/v<FORMAT_VERSION>/<key>/ holds
  kernel.bin        header + payload (CUBIN/PTX, OpenCL program binary); absent for modules
  qc_<key16><ext>   the final source, named after the key so a profiler's or debugger's file
                    name leads back to the entry (for the cpu backend it is the module numba
                    compiles and caches beside, in __pycache__/)
  meta.json         metadata; written last, so its presence says the other files are complete
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import tempfile
from pathlib import Path

from .keys import FORMAT_VERSION, sha256_hex

MAGIC = b"QCKERNEL"
# magic, format version, payload length, payload SHA-256, key SHA-256. The key is in the
# header so a binary copied into another entry's directory is rejected, not run.
_HEADER = struct.Struct("<8sIQ32s32s")
HEADER_SIZE = _HEADER.size

BINARY_FILE = "kernel.bin"
META_FILE = "meta.json"

# Bounds on what reading one entry file may take (read_entry_file): metadata is a few KB,
# a module's source tens of KB, a CUBIN or one numba cache file a few MB.
META_MAX_BYTES = 4 << 20
FILE_MAX_BYTES = 1 << 30


class DamagedEntry(Exception):
    """An entry file exists but is not what this package wrote for this key."""


def source_file_name(key_digest: str, suffix: str) -> str:
    if not suffix.startswith(".") or not suffix[1:].isalnum():
        raise ValueError(f"source_suffix must look like '.cu', '.cl' or '.py', got {suffix!r}")
    return f"qc_{key_digest[:16]}{suffix}"


def pack_binary(key_digest: str, payload: bytes) -> bytes:
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, len(payload),
                          bytes.fromhex(sha256_hex(payload)), bytes.fromhex(key_digest))
    return header + payload


def unpack_binary(key_digest: str, data: bytes) -> bytes:
    """The payload, or DamagedEntry saying what is wrong (truncated, altered, foreign)."""
    if len(data) < HEADER_SIZE:
        raise DamagedEntry(f"binary is {len(data)} bytes, shorter than its header")
    magic, version, length, payload_sha, key_sha = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DamagedEntry("binary does not start with the querycompute magic")
    if version != FORMAT_VERSION:
        raise DamagedEntry(f"binary has format version {version}, expected {FORMAT_VERSION}")
    if key_sha.hex() != key_digest:
        raise DamagedEntry("binary belongs to another key")
    payload = data[HEADER_SIZE:]
    if len(payload) != length:
        raise DamagedEntry(f"binary payload is {len(payload)} bytes, header says {length}")
    if sha256_hex(payload) != payload_sha.hex():
        raise DamagedEntry("binary payload does not match its SHA-256")
    return payload


def encode_meta(meta: dict) -> bytes:
    # sort_keys + indent: stable, diffable, readable by a person opening the file.
    return (json.dumps(meta, sort_keys=True, indent=2) + "\n").encode("utf-8")


def read_entry_file(path: Path, limit: int) -> bytes:
    """The bytes of one entry file, read so that no file found on disk can hang or flood the
    reader: anything but a regular file (a symbolic link, a directory, a FIFO, a device) and
    a file over `limit` bytes is DamagedEntry, checked before opening (a FIFO or device is
    never opened), opened without following links and without blocking, at most `limit`
    bytes read. A missing file raises FileNotFoundError (the caller knows whether that is
    damage or an entry not written yet or removed since); other OSErrors pass through."""
    try:
        before = os.lstat(path)
    except NotADirectoryError:
        raise FileNotFoundError(f"no file at {path}") from None
    if not stat.S_ISREG(before.st_mode):
        raise DamagedEntry(f"{path.name} is not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)             # the file opened is the one checked (not swapped since)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev,
                                                                       before.st_ino):
            raise DamagedEntry(f"{path.name} changed while it was opened")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise DamagedEntry(f"{path.name} is larger than {limit} bytes")
    return data


def decode_meta(key_digest: str, data: bytes) -> dict:
    """Parsed metadata, or DamagedEntry when it is not this key's metadata (not JSON, nested
    too deep for the parser, not an object, or a field the cache relies on of the wrong type)."""
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DamagedEntry(f"metadata is not valid JSON ({exc})") from None
    except RecursionError:
        raise DamagedEntry("metadata is JSON nested too deep to parse") from None
    if not isinstance(meta, dict):
        raise DamagedEntry("metadata is not a JSON object")
    if meta.get("format") != FORMAT_VERSION or meta.get("key") != key_digest:
        raise DamagedEntry("metadata belongs to another key or format version")
    for field, kind in (("kind", str), ("source_file", str), ("source_sha256", str),
                        ("backend", str), ("hit_count", int)):
        if not isinstance(meta.get(field), kind):
            raise DamagedEntry(f"metadata field {field!r} is missing or not a {kind.__name__}")
    for field, kind in (("payload_sha256", str), ("sealed_files", dict), ("sizes", dict),
                        ("compile_ms", (int, float))):
        if field in meta and not isinstance(meta[field], kind):
            raise DamagedEntry(f"metadata field {field!r} has the wrong type")
    sealed = meta.get("sealed_files", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in sealed.items()):
        raise DamagedEntry("metadata field 'sealed_files' is not a map of names to hashes")
    return meta


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same directory, then os.replace it into place, so a
    concurrent reader sees the old file or the new one, never half of one. No fsync: a file
    torn by a power cut fails its hash check and is recompiled, which is cheaper than an
    fsync on every store."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)             # a directory squatting on a file's name: damage
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
