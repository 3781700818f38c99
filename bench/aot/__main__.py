"""python -m bench.aot: the ahead-of-time compile table (bench/aot/table.py)."""
import sys

from bench.aot.table import main

sys.exit(main())
