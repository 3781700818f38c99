"""The device check (.ci/device-check): one call on a lent GPU machine, bounded by its own
wall clock, every result written under $OUT as it is measured.

    watchdog.py   one step as a child process group: SIGINT at its limit less a grace, SIGKILL at its limit
    plan.py       the steps, their limits and their predicted seconds (bench.aot.predict)
    main.py       the check itself: the steps in order, each after the last, within the deadline
"""
