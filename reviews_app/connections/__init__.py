"""Repository connections (issue 15): the pages to connect a repository on GitHub, GitLab or
Forgejo/Gitea, its secrets (``secrets``), and the webhook receiver (``webhook``)."""
