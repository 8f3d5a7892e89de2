"""`python -m thinker ...`: the same as the `thinker` console script."""

from thinker.cli import main

raise SystemExit(main())
