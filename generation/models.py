"""Models of the generation app (arrive with the generation issue)."""
