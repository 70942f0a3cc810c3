"""``python -m torchlime.cli``: the ``torchlime`` command line."""

import sys

from torchlime.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
