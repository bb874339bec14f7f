"""The run pipeline: a plan of trials executed on test beds, written to a record.

Every measurement fwlab makes (a suite, ``--ruleset``, ``optimize``, each bench) goes through
this package: ``plan`` expands a suite into trials, ``estimate`` prices them, ``executor`` runs
them one test bed at a time and writes each trial the moment it ends.
"""
