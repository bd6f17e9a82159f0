"""Signed webhook deliveries for the tests: a connection with a sealed secret, and payloads
and headers as GitHub, GitLab and Forgejo send them."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json

from django.urls import reverse

from common import sealed
from reviews_app.models import Connection

TOKEN = "ghp_tokenvalue_ABCDEFGHIJKLMNOPQRSTUVWX1234"  # noqa: S105 - test fixture
SECRET = "whsec-the-webhook-secret-0123456789"  # noqa: S105 - test fixture
SHA = "0123456789abcdef0123456789abcdef01234567"
API = {"github": "https://api.github.com", "gitlab": "https://gitlab.com/api/v4",
       "forgejo": "https://codeberg.org/api/v1"}
_ids = itertools.count(1)


def make_conn(owner, provider="github", repository="octo/widgets", **kw) -> Connection:
    fields = {"token_sealed": sealed.seal(TOKEN), "token_hint": sealed.hint(TOKEN),
              "secret_sealed": sealed.seal(SECRET), "secret_hint": sealed.hint(SECRET)}
    fields.update(kw)
    return Connection.objects.create(owner=owner, provider=provider, repository=repository,
                                     api_url=API[provider], **fields)


def sign(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_pr(action="opened", number=7, sha=SHA, repo="octo/widgets", **pr) -> dict:
    return {"action": action, "number": number,
            "pull_request": {"number": number, "head": {"sha": sha}, "merged": False,
                             "draft": False, **pr},
            "repository": {"full_name": repo}, "sender": {"login": "carol"}}


def github_comment(body="/quorum review", number=7, repo="octo/widgets", on_pr=True) -> dict:
    issue = {"number": number}
    if on_pr:
        issue["pull_request"] = {"url": "https://api.github.com/x"}
    return {"action": "created", "issue": issue,
            "comment": {"body": body, "user": {"login": "dave"}},
            "repository": {"full_name": repo}, "sender": {"login": "dave"}}


def gitlab_mr(action="open", iid=3, sha=SHA, repo="group/sub/proj", **attrs) -> dict:
    return {"object_kind": "merge_request", "user": {"username": "erin"},
            "project": {"path_with_namespace": repo},
            "object_attributes": {"iid": iid, "action": action, "last_commit": {"id": sha},
                                  **attrs}}


def gitlab_note(note="/quorum review", iid=3, repo="group/sub/proj",
                noteable="MergeRequest") -> dict:
    return {"object_kind": "note", "user": {"username": "erin"},
            "project": {"path_with_namespace": repo},
            "object_attributes": {"note": note, "noteable_type": noteable},
            "merge_request": {"iid": iid, "last_commit": {"id": SHA}}}


def forgejo_pr(action="opened", number=5, sha=SHA, repo="octo/widgets") -> dict:
    return {"action": action, "number": number,
            "pull_request": {"number": number, "head": {"sha": sha}, "merged": False},
            "repository": {"full_name": repo}, "sender": {"login": "frank"}}


def forgejo_comment(body="/quorum review", number=5, repo="octo/widgets") -> dict:
    return {"action": "created", "is_pull": True,
            "issue": {"number": number, "pull_request": {"merged": False}},
            "comment": {"body": body, "user": {"login": "frank"}},
            "repository": {"full_name": repo}, "sender": {"login": "frank"}}


def headers_for(provider: str, body: bytes, event: str, *, secret: str = SECRET,
                delivery: str | None = None) -> dict:
    delivery = delivery if delivery is not None else f"delivery-{next(_ids)}"
    if provider == "github":
        h = {"X-GitHub-Event": event, "X-Hub-Signature-256": "sha256=" + sign(body, secret)}
        h["X-GitHub-Delivery"] = delivery
    elif provider == "gitlab":
        h = {"X-Gitlab-Event": event, "X-Gitlab-Token": secret,
             "X-Gitlab-Event-UUID": delivery}
    else:
        h = {"X-Forgejo-Event": event, "X-Forgejo-Signature": sign(body, secret),
             "X-Forgejo-Delivery": delivery}
    return {k: v for k, v in h.items() if v}


def post(client, conn, payload, event, *, secret=SECRET, delivery=None, body=None,
         headers=None, provider=None):
    body = body if body is not None else json.dumps(payload).encode()
    h = headers_for(conn.provider, body, event, secret=secret, delivery=delivery)
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    url = reverse("webhook", args=[provider or conn.provider, conn.hook_id])
    return client.post(url, data=body, content_type="application/json", headers=h)


# --- GitHub Apps ------------------------------------------------------------------------------
def _rsa_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode()


APP_KEY = _rsa_pem()  # one RSA key for the test run: generating one takes a moment
APP_SECRET = "app-webhook-secret-0123456789abcdef"  # noqa: S105 - test fixture


def public_pem(private_pem: str = APP_KEY) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def make_app(owner, *, api_url="https://api.github.com", app_id="4242", slug="quorum-review",
             **kw):
    from reviews_app.models import GitHubApp

    fields = {"key_sealed": sealed.seal(APP_KEY), "key_hint": "SHA256:test…",
              "secret_sealed": sealed.seal(APP_SECRET), "secret_hint": sealed.hint(APP_SECRET)}
    fields.update(kw)
    return GitHubApp.objects.create(owner=owner, api_url=api_url, app_id=app_id, slug=slug,
                                    **fields)


def installation_payload(action="created", installation=77, repos=("octo/widgets",),
                         account="octo", key="repositories", app_slug="quorum-review") -> dict:
    listed = [{"id": i, "name": r.split("/")[1], "full_name": r, "private": True}
              for i, r in enumerate(repos, 1)]
    return {"action": action, key: listed, "sender": {"login": "octo-admin"},
            "installation": {"id": installation, "account": {"login": account},
                             "app_slug": app_slug, "app_id": 4242}}


def post_app(client, app, payload, event, *, secret=APP_SECRET, delivery=None):
    body = json.dumps(payload).encode()
    h = headers_for("github", body, event, secret=secret, delivery=delivery)
    return client.post(reverse("github_app_webhook", args=[app.hook_id]), data=body,
                       content_type="application/json", headers=h)
