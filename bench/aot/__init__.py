"""Ahead of time: compile targets, the compile plan, the compile pool, the table (python -m bench.aot),
precompile and the dry run's prediction."""
