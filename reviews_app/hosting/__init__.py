"""Code hosts: the interface Quorum needs (``base``), one client per provider, fetching a pull
request as a review input, and the summary comment. Plain Python, no Django."""

from __future__ import annotations

from .base import HostClient, HostError, RepoRef


def client_for(ref: RepoRef) -> HostClient:
    """The provider client for ``ref`` (one ``httpx.Client`` each: ``close()`` it when done).
    Tests patch this name to hand out a FakeHost."""
    if ref.provider == "github":
        from .github import GitHubClient
        return GitHubClient(ref)
    if ref.provider == "gitlab":
        from .gitlab import GitLabClient
        return GitLabClient(ref)
    if ref.provider == "forgejo":
        from .forgejo import ForgejoClient
        return ForgejoClient(ref)
    raise HostError(f"Unknown code host {str(ref.provider)[:40]!r}: use github, gitlab or "
                    "forgejo.")
