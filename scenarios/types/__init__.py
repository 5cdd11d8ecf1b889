"""The scenario types, one module each (a ``ScenarioKind`` subclass, ``base``), collected by
``registry``: the one place that knows which types exist."""
