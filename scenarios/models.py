"""Models of the scenarios app (arrive with the scenarios issue)."""
