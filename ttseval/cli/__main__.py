"""`python -m ttseval.cli`."""

import sys

from ttseval.cli import main

if __name__ == "__main__":  # also guards Dask's spawned workers, which import this module as __mp_main__
    sys.exit(main())
