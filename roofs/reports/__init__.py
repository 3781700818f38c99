"""Reports from a run folder's files: the finish of a run, report, summary, brief, compare and devices."""
