"""Repository work for agents: a sandboxed view of a git worktree (``workspace``), git plumbing
that never touches the person's checkout (``gitops``) and a tool registry for agent loops
(``tools``). Plain Python: no Django imports; settings are passed in as arguments."""
