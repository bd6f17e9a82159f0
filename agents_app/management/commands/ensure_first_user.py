"""Create the first account when there is none; print its password once."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create a first superuser if the database has no user (QUORUM_ADMIN_USERNAME/PASSWORD)."

    def add_arguments(self, parser):
        parser.add_argument("--url", help="where to sign in (make dev gives the address it "
                                          "serves; default: QUORUM_HOST and QUORUM_PORT)")

    def handle(self, *args, **opts):
        User = get_user_model()
        if User.objects.exists():
            return
        username = os.environ.get("QUORUM_ADMIN_USERNAME", "admin")
        password = os.environ.get("QUORUM_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        given = bool(os.environ.get("QUORUM_ADMIN_PASSWORD"))
        shown = "(from QUORUM_ADMIN_PASSWORD)" if given else password
        url = opts.get("url") or (f"http://{os.environ.get('QUORUM_HOST', '127.0.0.1')}:"
                                  f"{os.environ.get('QUORUM_PORT', '8000')}")
        self.stdout.write(self.style.SUCCESS(
            f"\n  First account created — sign in at {url}\n"
            f"    username: {username}\n    password: {shown}\n"
            + ("" if given else "  This password is shown only once.\n")))
