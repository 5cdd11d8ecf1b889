"""The execution engine's models (batch registry, ...) arrive with the generation issue."""
