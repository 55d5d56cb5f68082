"""The use cases behind the command line (init, keys, add, push/pull, verify, ls/show/status,
check). Each function takes a :class:`~casstore.project.Project` and returns a result the CLI
renders; nothing here prints.
"""
