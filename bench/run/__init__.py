"""A run from a plan to a run folder: options, session, the sustained phase, the multi-device launcher and
collectives."""
