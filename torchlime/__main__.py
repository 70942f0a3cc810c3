"""``python -m torchlime``: the ``torchlime`` command line (``torchlime.cli``)."""

import sys

from torchlime.cli import main

if __name__ == "__main__":
    sys.exit(main())
