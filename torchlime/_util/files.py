"""Folders whose entries are untrusted: opened through the folder's descriptor, never through a link.

A result folder of ``explain_dataset`` may come from elsewhere (a download, a shared disk), and the
command line writes into folders next to it. Any entry of such a folder may be a symbolic link to a file
outside, a named pipe, a device or a sparse file of many gigabytes. ``Folder`` opens the folder the
caller names (which may itself be, or pass through, a link: that is the caller's choice) and then every
entry relative to the folder's descriptor with ``O_NOFOLLOW``:

* reading opens with ``O_NONBLOCK`` (a named pipe cannot block), checks with ``fstat`` that the entry is
  a regular file and reads at most a given number of bytes (``read``), or hands out the descriptor and
  its real size (``open_file``) for reads of parts of it;
* writing creates a temporary entry with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (an entry already under
  that name, a planted link included, is removed, never followed), flushes it to disk, renames it over
  the entry (a rename replaces a link, never its target) and syncs the folder (``write``);
* a sub-folder is opened or created without following a link (``sub``).

Values read from such files are bounded before anything is allocated: ``load_json`` refuses JSON nested
more than ``MAX_DEPTH`` levels (checked on the raw bytes, without recursion) and ``count`` an int out of
``[low, 2**31)``. Every refusal is a ``ValueError`` naming the file. POSIX only (``dir_fd``, ``O_NOFOLLOW``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Callable, Optional, Union

#: the deepest nesting of arrays and objects accepted in a JSON file or header read from a folder
MAX_DEPTH = 32
#: one past the largest count (inputs, shards, rows, features, a dimension) accepted from a folder
COUNT_LIMIT = 2**31
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_READ = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_LINK_ERRORS = (errno.ELOOP, errno.EMLINK)  # what O_NOFOLLOW on a link gives (Linux, macOS; FreeBSD)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_PAIR = re.compile(rb"\[\]|\{\}")
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))


def _kind(mode: int) -> str:
    """What a file mode is, in words."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def create(dir_fd: int, name: str, data: bytes) -> None:
    """Create the entry ``name`` of the folder ``dir_fd`` holding ``data``, flushed to disk.

    Created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: an existing entry (a link included) is never opened.

    Raises:
        FileExistsError: the entry exists. OSError: the write failed (its partial file is left).
    """
    fd = os.open(name, _CREATE, 0o666, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_at(fd: int, offset: int, size: int, where: Union[str, Path]) -> bytearray:
    """Exactly ``size`` bytes of the open file ``fd`` from ``offset``.

    Raises:
        ValueError: the file ends before (it shrank since its size was read).
    """
    buf = bytearray(size)
    view, done = memoryview(buf), 0
    while done < size:
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            raise ValueError(
                f"{where} ends at byte {offset + done}, before the {size} bytes from {offset} it should hold"
            )
        done += n
    return buf


def load_json(data: bytes, where: Union[str, Path], max_depth: int = MAX_DEPTH) -> object:
    """Parse untrusted JSON bytes, refusing nesting deeper than ``max_depth`` before parsing.

    The depth is found on the raw bytes: strings removed, then the innermost ``[]`` / ``{}`` pairs
    removed once per level (no recursion, a few passes over the bytes at C speed).

    Raises:
        ValueError: not JSON, or nested too deep (naming ``where``).
    """
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    for _ in range(max_depth):
        if not brackets:
            break
        brackets = _PAIR.sub(b"", brackets)
    if brackets:
        raise ValueError(
            f"{where} must be JSON nested at most {max_depth} levels deep, got deeper nesting (or no JSON)"
        )
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"{where} must be JSON nested at most {max_depth} levels deep, got deeper nesting") from None
    except ValueError as err:
        raise ValueError(f"{where} must be JSON, got bytes that are not ({err})") from None


def count(value: object, what: str, low: int = 0) -> int:
    """``value`` as an int count in ``[low, 2**31)`` (a bool is not one).

    Raises:
        ValueError: anything else, naming ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < COUNT_LIMIT:
        shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:57]}..."
        raise ValueError(f"{what} must be an int in [{low}, 2**31), got {shown}")
    return value


class Folder:
    """An open folder whose entries are opened relative to its descriptor, never through a link.

    Use ``Folder.open(path)`` (the folder itself may be a link) as a context manager; ``sub`` opens a
    sub-folder that must not be a link.

    Args:
        path: the folder's path (for messages).
        fd: its descriptor (closed by ``close``).
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def open(cls, path: Union[str, os.PathLike[str]]) -> Folder:
        """The folder ``path`` (which may be or pass through a link: the caller named it).

        Raises:
            FileNotFoundError: no such folder. NotADirectoryError: not a folder.
        """
        return cls(Path(path), os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC))

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the folder's descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def where(self, name: str) -> Path:
        """The path of entry ``name`` (for messages)."""
        return self.path / name

    def kind(self, name: str) -> Optional[str]:
        """What entry ``name`` is, not following a link ("a regular file", "a symbolic link", ...), or None."""
        try:
            return _kind(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        """The names of the folder's entries."""
        return os.listdir(self.fd)

    def sub(self, name: str, create: bool = False) -> Folder:
        """The sub-folder ``name``, created when ``create``; a link there is refused, never followed.

        Raises:
            ValueError: the entry is a link or not a folder. OSError: it cannot be created or opened.
        """
        if create:
            try:
                os.mkdir(name, 0o777, dir_fd=self.fd)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except OSError as err:
            if err.errno in (*_LINK_ERRORS, errno.ENOTDIR):
                raise ValueError(
                    f"{self.where(name)} must be a folder, got {self.kind(name) or 'nothing'} "
                    f"(a link in a folder is never followed)"
                ) from None
            raise
        return Folder(self.where(name), fd)

    def open_file(self, name: str) -> tuple[int, int]:
        """A descriptor of the regular file ``name``, for reading, and its size (the caller closes it).

        Raises:
            ValueError: a link, a named pipe, a device, a folder (named). FileNotFoundError: no entry.
        """
        try:
            fd = os.open(name, _READ, dir_fd=self.fd)
        except OSError as err:
            if err.errno in _LINK_ERRORS:
                raise ValueError(
                    f"{self.where(name)} must be a regular file, got a symbolic link (never followed)"
                ) from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise ValueError(f"{self.where(name)} must be a regular file, got {_kind(info.st_mode)}")
        return fd, info.st_size

    def read(self, name: str, limit: int) -> bytes:
        """The bytes of the regular file ``name``, at most ``limit`` of them.

        Raises:
            ValueError: not a regular file, or larger than ``limit``. FileNotFoundError: no entry.
        """
        fd, size = self.open_file(name)
        try:
            if size > limit:
                raise ValueError(f"{self.where(name)} must hold at most {limit} bytes, got {size}")
            return bytes(read_at(fd, 0, size, self.where(name)))
        finally:
            os.close(fd)

    def read_json(self, name: str, limit: int) -> object:
        """The JSON file ``name`` (at most ``limit`` bytes, ``MAX_DEPTH`` levels), parsed."""
        return load_json(self.read(name, limit), self.where(name))

    def write(
        self,
        name: str,
        data: bytes,
        tmp: Optional[str] = None,
        before_rename: Optional[Callable[[], None]] = None,
        refuse_link: bool = False,
    ) -> Path:
        """Write entry ``name`` atomically: a temporary entry, flushed, renamed over it, the folder synced.

        A failed write (a full disk: ``ENOSPC``, a file too large: ``EFBIG``, ...) removes the temporary
        entry and raises; ``name`` is left as it was.

        Args:
            name: the entry.
            data: its bytes.
            tmp: the temporary entry's name (default ``.NAME.PID.tmp``); an entry already there (a dead
                writer's, a planted link) is removed first, never followed.
            before_rename: called between the write and the rename.
            refuse_link: refuse an entry ``name`` that is a link (else the rename replaces the link itself).

        Returns:
            The entry's path.

        Raises:
            ValueError: ``refuse_link`` and the entry is a link.
        """
        if refuse_link and self.kind(name) == "a symbolic link":
            raise ValueError(
                f"{self.where(name)} must not be a symbolic link: a file is never written through a link; "
                f"remove the link or write elsewhere"
            )
        tmp = tmp if tmp is not None else f".{name}.{os.getpid()}.tmp"
        try:
            try:
                create(self.fd, tmp, data)
            except FileExistsError:
                os.unlink(tmp, dir_fd=self.fd)
                create(self.fd, tmp, data)
            if before_rename is not None:
                before_rename()
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                self.remove(tmp)
            raise
        self.sync()
        return self.where(name)

    def create(self, name: str, data: bytes) -> bool:
        """Create entry ``name`` holding ``data`` unless it exists (``O_EXCL``); True when created."""
        try:
            create(self.fd, name, data)
        except FileExistsError:
            return False
        return True

    def rename(self, src: str, dst: str) -> None:
        """Rename entry ``src`` to ``dst`` (replacing it; links are renamed, not followed)."""
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def remove(self, name: str) -> bool:
        """Remove entry ``name`` (a link itself, never its target); False when it was not there."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True

    def sync(self) -> None:
        """Flush the folder's entries to disk (where the platform can sync a folder)."""
        try:
            os.fsync(self.fd)
        except OSError:
            pass
