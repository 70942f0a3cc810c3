"""One writer per result folder: ``out/.lock``, held for the duration of an ``explain_dataset`` run.

The lock file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (atomic on local file systems; a link
there is never followed) and holds JSON (read back as untrusted: a regular file of at most 4 KiB): the
writer's ``host``, ``pid``, ``started`` (UTC, ISO 8601) and ``run`` (an id shared by the ranks of one
``torchrun`` job, so they join the lock of rank 0 instead of being refused). A second run on the same
folder is refused at once with a ``FolderLockedError`` naming the holder. A lock is stale only when its
host is this host and its pid is no longer alive: it is then taken over with a warning (renamed aside
first, so two processes cannot both take it over). A lock of another host, or of a live process, is
never broken here: the message says how to break it by hand.

Temporary files carry their writer's identity (``writer_tag``), and cleanup removes only those of dead
processes of this host (``tmp_is_orphan``), never another live writer's.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import time
import uuid
import warnings
from pathlib import Path
from typing import Optional

from torchlime._util.files import Folder, load_json

LOCK = ".lock"
#: the most bytes a lock file may hold
MAX_LOCK = 4096
_TAG = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^./]+)\.(?P<pid>\d+)\.tmp$")


class FolderLockedError(RuntimeError):
    """Another process holds the result folder's lock (see ``torchlime.dataset._lock``)."""


def host() -> str:
    """This machine's name (as the lock files write it: dots and slashes replaced)."""
    return re.sub(r"[./]", "_", socket.gethostname()) or "localhost"


def writer_tag() -> str:
    """``HOST.PID``: the identity a temporary file carries."""
    return f"{host()}.{os.getpid()}"


def new_run_id() -> str:
    """A fresh run id (the ranks of one torchrun job share rank 0's)."""
    return uuid.uuid4().hex


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists on this host (or cannot be signalled for lack of permission)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as err:
        return err.errno != errno.ESRCH
    return True


def tmp_is_orphan(name: str) -> bool:
    """True for a temporary file left by a dead writer of this host (or of the first format, untagged).

    Args:
        name: a file name in the folder (``.NAME.HOST.PID.tmp``, or ``.NAME.tmp`` of the first format).
    """
    m = _TAG.match(name)
    if m is None:
        return name.startswith(".") and name.endswith(".tmp")
    return m.group("host") == host() and not pid_alive(int(m.group("pid")))


def _read(out: Path) -> Optional[dict[str, object]]:
    """The lock's holder, or None when the file vanished; a half-written lock reads as an unknown holder.

    The lock is read as untrusted input: a regular file of at most ``MAX_LOCK`` bytes, never through a link.

    Raises:
        ValueError: ``.lock`` is not a regular file (a link, a named pipe, ...) or is larger than that.
    """
    for _ in range(50):  # a lock being written by its creator: give it a moment
        try:
            with Folder.open(out) as folder:
                text = folder.read(LOCK, MAX_LOCK)
        except FileNotFoundError:
            return None
        except ValueError as err:
            raise ValueError(f"{err}; if no process writes {out}, delete {Path(out) / LOCK}") from None
        try:
            info = load_json(text, Path(out) / LOCK)
            if isinstance(info, dict):
                return info
        except ValueError:
            pass
        time.sleep(0.01)
    return {"host": "?", "pid": -1, "started": "?", "run": "?"}


class FolderLock:
    """The lock of one result folder, for one run.

    Args:
        out: the folder (it must exist).
        run: this run's id (``new_run_id``; shared by the ranks of one job).
    """

    def __init__(self, out: Path, run: str) -> None:
        self.out, self.run, self.owned = Path(out), run, False
        self.path = self.out / LOCK

    def acquire(self) -> None:
        """Take the lock, join it (same run), or take over a stale one.

        Raises:
            FolderLockedError: another live writer (or one that cannot be checked) holds the folder.
        """
        for _ in range(3):
            if self._create():
                self.owned = True
                return
            holder = _read(self.out)
            if holder is None:
                continue  # released meanwhile: try again
            if holder.get("run") == self.run:
                return  # a rank of this run took it
            same_host = holder.get("host") == host()
            pid = holder.get("pid")
            if same_host and isinstance(pid, int) and not pid_alive(pid):
                aside = f"{LOCK}.stale.{writer_tag()}"
                try:
                    with Folder.open(self.out) as folder:
                        folder.rename(LOCK, aside)  # only one of several takers gets the file
                        folder.remove(aside)
                except FileNotFoundError:
                    continue
                warnings.warn(
                    f"taking over the stale lock of {self.path.parent}: its writer (pid {holder['pid']} on "
                    f"{holder['host']}, started {holder.get('started')}) is no longer running",
                    RuntimeWarning,
                    stacklevel=4,
                )
                continue
            how = (
                "wait for it to finish"
                if same_host
                else f"if no process on {holder.get('host')} writes it any more, delete {self.path}"
            )
            raise FolderLockedError(
                f"`out` {str(self.path.parent)!r} is being written by another run (pid {holder.get('pid')} on "
                f"host {holder.get('host')}, started {holder.get('started')}): one writer per folder; {how}, "
                f"or choose another folder"
            )
        raise FolderLockedError(f"could not take the lock {self.path}: it changes hands too often")

    def _create(self) -> bool:
        info = {
            "host": host(),
            "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "run": self.run,
        }
        with Folder.open(self.out) as folder:
            return folder.create(LOCK, json.dumps(info).encode())  # O_EXCL: a link there is never followed

    def release(self) -> None:
        """Remove the lock if this process took it and it is still this run's."""
        if not self.owned:
            return
        self.owned = False
        holder = _read(self.out)
        if holder is not None and holder.get("run") == self.run:
            with Folder.open(self.out) as folder:
                folder.remove(LOCK)
