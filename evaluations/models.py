"""Models of the evaluations app (arrive with the evaluations issue)."""
