"""``python -m bench``: see ``bench/cli.py`` for the flags."""

from bench.cli import main

raise SystemExit(main())
