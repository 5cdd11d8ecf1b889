"""Helpers the test modules share (builders of requests and runs, clients, waits): test
modules import them from here, never from another test module. Fixtures live in the
conftest.py files, model factories in ``tests/factories.py``."""
