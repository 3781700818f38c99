"""python -m bench.devcheck: the device check (.ci/device-check runs it)."""
from bench.devcheck.main import main

raise SystemExit(main())
