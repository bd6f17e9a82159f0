"""Code both apps use and neither owns: starting child processes, recognising secrets, and
the analyzers. Plain Python, no Django."""
