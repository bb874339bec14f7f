"""The run pipeline: a plan of trials executed on test beds, written to a record.

Every measurement fwlab makes (a suite, ``--ruleset``, ``optimize``, each bench) goes through
this package, from its one entry point :func:`fwlab.run.start.start`: for a suite, ``plan``
expands it into trials, ``estimate`` prices them, ``executor`` runs them one test bed at a time
and writes each trial the moment it ends; a staged job (``stages``: ``--ruleset``, ``optimize``)
is run by ``staged`` on one bed, stage by stage, each planned from the results before it.
"""
