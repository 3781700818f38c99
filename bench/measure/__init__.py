"""Measuring one point: the registry of ops, the skip decision, the correctness gate, the timer, the runner,
inputs, the memory budget and progress."""
