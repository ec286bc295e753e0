"""``python -m kernelpro``: the same command line as ``kernelpro``."""

from kernelpro.cli import main

main()
