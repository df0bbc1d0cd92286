"""What chooses and stops trials: the search space and its rules, schedulers and searchers, the
defaults trial, warm starts, the sweep's and the checkpoints' budgets, and the simulation of a
finished sweep's curves under another scheduler."""
