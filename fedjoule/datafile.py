"""Opening a data file a user names (a trace, initial weights, a dataset file): it must be
a regular file no larger than its kind's limit, or a FedjouleError names the file.

The file is opened with O_NONBLOCK and checked with fstat before a byte is read, so a
FIFO, a device (/dev/zero, also behind a symlink), a socket or a folder is refused at
once instead of blocking for ever or being read without end. The limits (MAX_BYTES) are
far above any real file of the kind: FedScale's behaviour trace, the largest, is about
100 MB as JSON.
"""

import io
import os
import stat

from fedjoule.errors import FedjouleError

MIB = 1024 * 1024
MAX_BYTES = {
    "trace": 1024 * MIB,  # availability, link and FedScale traces (CSV, JSON or pickle)
    "weights": 16 * 1024 * MIB,  # a state_dict (a 4-billion-parameter float32 model)
    "dataset": 4 * 1024 * MIB,  # a text or tabular dataset file
    "power profile": MIB,  # an Android power_profile.xml (real ones are under 20 KB)
}
NAMED_CHARS = 200  # the longest file name quoted in a message


def shown(path, field: str = "") -> str:
    """The file's name for a message (cut to NAMED_CHARS), after `field` when given."""
    text = str(path)
    text = text if len(text) <= NAMED_CHARS else text[: NAMED_CHARS - 3] + "..."
    return f"{field} {text}" if field else text


def _kind_of(mode: int) -> str:
    for test, what in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def open_data_file(path, field: str, kind: str) -> io.BufferedReader:
    """The regular file at `path` opened for binary reading; FedjouleError naming `field`
    and the file when it is missing, unreadable, not a regular file, or larger than
    MAX_BYTES[kind]."""
    where = shown(path, field)
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        why = getattr(exc, "strerror", None) or str(exc)
        raise FedjouleError(f"{where}: cannot be read ({why})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FedjouleError(f"{where}: {_kind_of(info.st_mode)}; give a regular file")
        if info.st_size > MAX_BYTES[kind]:
            raise FedjouleError(
                f"{where}: {info.st_size:,} bytes, larger than the {MAX_BYTES[kind]:,} bytes "
                f"allowed for a {kind} file"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_data_file(path, field: str, kind: str) -> bytes:
    """The bytes of a data file (see open_data_file); a file that grows past the limit
    while it is read (a regular file in /proc reports size 0) is refused the same way."""
    limit = MAX_BYTES[kind]
    try:
        with open_data_file(path, field, kind) as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise FedjouleError(
            f"{shown(path, field)}: cannot be read ({exc.strerror or type(exc).__name__})"
        ) from None
    if len(data) > limit:
        raise FedjouleError(
            f"{shown(path, field)}: larger than the {limit:,} bytes allowed for a {kind} file"
        )
    return data


def read_data_text(path, field: str, kind: str, errors: str = "strict") -> str:
    """A data file's text, decoded as UTF-8 (a leading BOM dropped; `errors` as in
    bytes.decode); FedjouleError naming the line of the first byte that is not UTF-8."""
    return utf8_text(read_data_file(path, field, kind), shown(path, field), errors)


def utf8_text(data: bytes, label: str, errors: str = "strict", hint: str = "") -> str:
    """`data` decoded as UTF-8 (a leading BOM dropped); else a FedjouleError naming `label`
    and the line of the first byte that is not UTF-8, then `hint` when given."""
    try:
        return data.decode("utf-8-sig", errors)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FedjouleError(
            f"{label}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})"
            + (f"; {hint}" if hint else "")
        ) from None
