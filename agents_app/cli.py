"""What the management commands that start runs share."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from .llm.gateway import check_model_name


def command_owner(username: str | None):
    """The user a headless run belongs to: ``username``, else the first superuser, else a
    ``cli`` user made for the purpose."""
    User = get_user_model()
    if username:
        try:
            return User.objects.get(username=username)
        except User.DoesNotExist:
            raise CommandError(f"No user {username!r}.") from None
    user = User.objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        user, _ = User.objects.get_or_create(username="cli")
    return user


def parse_models(specs: list[str], roles: tuple[str, ...], *, returncode: int = 1) -> dict:
    """``--model ROLE=NAME`` options as role → model; CommandError for a bad one."""
    models = {}
    for spec in specs:
        role, sep, name = spec.partition("=")
        if not sep or role not in roles:
            raise CommandError(f"--model takes ROLE=NAME with ROLE one of {', '.join(roles)}.",
                               returncode=returncode)
        if problem := check_model_name(name.strip()):
            raise CommandError(problem, returncode=returncode)
        models[role] = name.strip()
    return models
