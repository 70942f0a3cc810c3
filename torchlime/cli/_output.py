"""The folders the commands write into: files written without ever following a link (``Output``).

A command writes next to folders that may come from elsewhere (``torchlime show DIR`` into
``DIR/pictures``, ``torchlime summarize DIR`` into ``DIR/summary``). An output folder the command derives
inside such a folder must not be a link (it is refused, never followed); a folder the caller names with
``--out`` may itself be, or pass through, a link (the caller chose it). Every file is written into the
open folder with ``Folder.write`` (``torchlime._util.files``): a temporary file created with
``O_EXCL | O_NOFOLLOW``, renamed over the entry; an entry that is a link is refused with a message naming it.
Files that a library writes by path (``Explanation.save``, WAV files) are written into a private staging
folder first, then copied in the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

from torchlime._util.files import Folder
from torchlime.cli._common import CliError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Output:
    """An open output folder of a command (see the module docstring).

    Args:
        folder: the open folder.

    Attributes:
        path: the folder's path.
    """

    def __init__(self, folder: Folder) -> None:
        self.folder, self.path = folder, folder.path
        self._staging: Optional[Path] = None

    def write(self, name: str, data: bytes) -> Path:
        """Write the file ``name`` (replaced atomically; a link there is refused).

        Returns:
            Its path.

        Raises:
            CliError: ``name`` is a link in the folder, or the file cannot be written.
        """
        try:
            return self.folder.write(name, data, refuse_link=True)
        except ValueError as err:
            raise CliError(str(err)) from None

    def json(self, name: str, data: object) -> Path:
        """Write ``data`` as indented JSON (with a final newline) to ``name``."""
        return self.write(name, (json.dumps(data, indent=2) + "\n").encode())

    def figure(self, name: str, fig: Figure) -> Path:
        """Write a matplotlib figure as the PNG ``name`` (110 dpi, cropped to what it draws) and close it."""
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")  # every label inside the PNG
        plt.close(fig)
        return self.write(name, buffer.getvalue())

    def staging(self) -> Path:
        """A private folder (this process's own, removed by ``close``) for files a library writes by path."""
        if self._staging is None:
            self._staging = Path(tempfile.mkdtemp(prefix="torchlime-"))
        return self._staging

    @contextlib.contextmanager
    def staged(self, name: str) -> Iterator[Path]:
        """A path in the staging folder to write ``name`` to; on exit its bytes become the file ``name``."""
        path = self.staging() / name
        yield path
        self.write(name, path.read_bytes())
        path.unlink()

    def close(self) -> None:
        """Close the folder and remove the staging folder."""
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        self.folder.close()


def open_output(out: Path, inside: Optional[Path] = None) -> tuple[Output, bool]:
    """The output folder ``out``, created if missing; (it, whether it was created here).

    Args:
        out: the folder.
        inside: the folder ``out`` is an entry of, when the command derived ``out`` from it (``DIR/summary``):
            ``out`` is then opened as an entry of ``inside`` and refused if it is a link.

    Raises:
        CliError: ``out`` is a file, a link where it must not be one, or cannot be created.
    """
    if out.exists() and not out.is_dir() and inside is None:
        raise CliError(f"--out {out} is a file, not a folder")
    created = not out.exists() and not out.is_symlink()
    try:
        if inside is not None:
            with Folder.open(inside) as parent:
                return Output(parent.sub(out.name, create=True)), created
        out.mkdir(parents=True, exist_ok=True)
        return Output(Folder.open(out)), created
    except ValueError as err:
        raise CliError(f"cannot write into {out}: {err}") from None
    except OSError as err:
        raise CliError(f"cannot create the output folder {out}: {err.strerror or err}") from None


@contextlib.contextmanager
def output_folder(out: Path, inside: Optional[Path] = None) -> Iterator[Output]:
    """Open (create) ``out`` on entry (``open_output``); if the body fails, remove it when it was created here.

    A folder that existed before is kept as it was given (files the command wrote stay).
    """
    output, created = open_output(out, inside)
    try:
        yield output
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        output.close()
