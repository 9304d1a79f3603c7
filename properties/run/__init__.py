"""How examples run: backends, targets, the user's kernel, worker processes, Hypothesis profiles."""
