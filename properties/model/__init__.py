"""The case model: what one example is (cases), how its values are drawn (profiles) and how
Hypothesis draws it (strategies)."""
