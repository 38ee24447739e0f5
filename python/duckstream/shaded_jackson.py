"""Relocate pyspark's own Jackson jars into the package Iceberg's Spark runtime expects.

Why this exists: Maven Central is unreachable on the machines this project runs on, so the
Iceberg Spark runtime has to come from PyPI. The package ``snowpark-connect-deps-iceberg``
ships the official ``iceberg-spark-runtime-3.5_2.12`` jar, but with its shaded Jackson classes
(``org/apache/iceberg/shaded/com/fasterxml/jackson/...``) stripped out, so the first ``CREATE
TABLE`` dies with ``NoClassDefFoundError``. pyspark ships Jackson itself (``pyspark/jars``), and
every Jackson class the runtime references exists in it. This module copies those jars into one
new jar with every class moved under the shaded prefix, as the Maven shade plugin would: entry
names are renamed, and each class file's constant pool is rewritten (every ``CONSTANT_Utf8``
holding ``com/fasterxml/jackson`` or ``com.fasterxml.jackson``: class names, descriptors,
generic signatures and reflective string literals), as are ``META-INF/services`` files.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

SHADED = "org.apache.iceberg.shaded."
JACKSON_ARTIFACTS = ("jackson-annotations", "jackson-core", "jackson-databind")
# Iceberg's bundled Arrow references the shaded JavaTimeModule too.
OPTIONAL_ARTIFACTS = ("jackson-datatype-jsr310",)
_FORMAT = 1  # bump when the output of relocate_jars changes

_CLASS_MAGIC = b"\xca\xfe\xba\xbe"
# Byte size of each constant-pool entry after its tag (CONSTANT_Utf8, tag 1, is variable).
_CP_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2}
_CP_SIZES |= {17: 4, 18: 4, 19: 2, 20: 2}
_PATTERN = re.compile(rb"com([./])fasterxml\1jackson\1")


def _relocate_bytes(data: bytes) -> bytes:
    """Prefix every ``com/fasterxml/jackson/`` (or dotted) name in ``data``."""

    def shade(m: re.Match[bytes]) -> bytes:
        return SHADED.replace(".", m[1].decode()).encode() + m[0]

    return _PATTERN.sub(shade, data)


def relocate_class(data: bytes) -> bytes:
    """Return a class file whose CONSTANT_Utf8 entries name the shaded Jackson packages."""
    if data[:4] != _CLASS_MAGIC:
        raise ValueError("not a class file")
    (count,) = struct.unpack_from(">H", data, 8)
    out = [data[:10]]
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            text = _relocate_bytes(data[pos + 3 : pos + 3 + length])
            out.append(struct.pack(">BH", 1, len(text)) + text)
            pos += 3 + length
        else:
            size = 1 + _CP_SIZES[tag]
            out.append(data[pos : pos + size])
            pos += size
        index += 2 if tag in (5, 6) else 1  # long and double take two slots
    out.append(data[pos:])
    return b"".join(out)


def _relocated_entry(jar: Path, name: str, data: bytes) -> tuple[str, bytes] | None:
    """Entry ``name`` of ``jar`` as it goes into the relocated jar, or None to leave it out."""
    if name in ("META-INF/LICENSE", "META-INF/NOTICE"):
        return f"META-INF/licenses/{jar.stem}/{name.removeprefix('META-INF/')}", data
    if name.endswith(".class") and not name.endswith("module-info.class"):
        return _relocate_bytes(name.encode()).decode(), relocate_class(data)
    if name.startswith("META-INF/services/") and not name.endswith("/"):
        return _relocate_bytes(name.encode()).decode(), _relocate_bytes(data)
    return None  # directories, manifests, Maven metadata, module descriptors


def relocate_jars(sources: list[Path], target: Path) -> None:
    """Write ``target``: the classes and service files of ``sources``, relocated."""
    manifest = "Manifest-Version: 1.0\r\nMulti-Release: true\r\nCreated-By: duckstream\r\n\r\n"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("META-INF/MANIFEST.MF", manifest)
        for source in sources:
            with zipfile.ZipFile(source) as jar:
                for name in jar.namelist():
                    if entry := _relocated_entry(source, name, jar.read(name)):
                        out.writestr(*entry)


def pyspark_jackson_jars(jars_dir: Path) -> list[Path]:
    """The Jackson jars pyspark ships (``pyspark/jars``): one per artifact, one version."""
    found: list[Path] = []
    for artifact in JACKSON_ARTIFACTS + OPTIONAL_ARTIFACTS:
        matches = sorted(jars_dir.glob(f"{artifact}-[0-9]*.jar"))
        if len(matches) > 1 or (not matches and artifact in JACKSON_ARTIFACTS):
            raise FileNotFoundError(f"expected one {artifact} jar in {jars_dir}, got {matches}")
        found += matches
    if len({_version(jar) for jar in found}) != 1:
        raise ValueError(f"Jackson jars of different versions in {jars_dir}: {found}")
    return found


def _version(jar: Path) -> str:
    return jar.stem.rsplit("-", 1)[-1]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "duckstream"


def cached_file(name: str, build: Callable[[Path], object], cache: Path | None = None) -> Path:
    """Return ``cache/name``, first calling ``build(path)`` to write it if it is missing.

    The file is built under a temporary name and renamed, so readers never see half a file
    and concurrent builders race harmlessly.
    """
    target = (cache or cache_dir()) / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.", suffix=".tmp")
        os.close(fd)
        try:
            build(Path(tmp))
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return target


def relocated_jackson_jar(jars_dir: Path, cache: Path | None = None) -> Path:
    """Build (once, cached by source versions) the relocated Jackson jar; return its path."""
    sources = pyspark_jackson_jars(jars_dir)
    key = hashlib.sha256(f"{_FORMAT}:{[(p.name, p.stat().st_size) for p in sources]}".encode())
    name = f"iceberg-shaded-jackson-{_version(sources[0])}-{key.hexdigest()[:12]}.jar"
    return cached_file(name, lambda path: relocate_jars(sources, path), cache)
