"""What a sweep hands back: the best trial and its export, the results table, plots and summary,
the anytime curves, several objectives' Pareto front, and the winner re-trained over seeds."""
