"""What the patterns that use tools share: the tools themselves (``toolbox``: their schemas,
the catalogue a model reads, running a call) and the offline model's reading of the calls a
task spells out (``offline``). Not a pattern: the registry does not list it."""
