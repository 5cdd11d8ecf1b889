"""The platform core. Named ``evalplatform`` because ``platform`` would shadow the stdlib module."""
