"""The two ways a job's cells run: ``live`` (through the execution engine, cell by cell)
and ``batch`` (through the providers' batch APIs). Both claim and record cells with
``generation.cells`` and change the job's status through ``generation.lifecycle``."""
