"""Every picture, drawn from a run folder's files only."""
