"""A researcher's own project, run with hfsweep from its own folder: sentence-level regression on
a numeric score, with a task, a metric and a loss of its own."""
