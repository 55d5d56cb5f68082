"""The use cases behind the command line, one module each (init, add, sync, pre_push, verify,
inspect, check, gc, diff, log, fork, view, demo). Each function takes a
:class:`~casstore.project.Project` and returns a result the CLI renders; nothing here prints.
"""
