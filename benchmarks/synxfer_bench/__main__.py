"""``python -m synxfer_bench``: the same as the ``synxfer-bench`` command."""

import sys

from .cli import main

sys.exit(main())
