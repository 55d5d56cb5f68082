"""The use cases behind the command line, one module each: each takes a
:class:`~casstore.project.Project` and returns a result the CLI renders; nothing here prints."""
