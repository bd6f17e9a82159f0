"""The connection form. Every rejection says what was wrong and what to do; a token or a
webhook secret is never rendered back into the page (the fields are password inputs that
never show a value), and a stored one is kept when the field is left empty on edit."""

from __future__ import annotations

import re
import secrets as pysecrets
from urllib.parse import urlsplit

from django import forms
from django.conf import settings

from common import sealed
from reviews_app.models import Connection, GitHubApp
from reviews_app.pipeline.schema import SEVERITIES

from .secrets import ENV_PREFIX

DEFAULT_API_URLS = {
    Connection.Provider.GITHUB: "https://api.github.com",
    Connection.Provider.GITLAB: "https://gitlab.com/api/v4",
    Connection.Provider.FORGEJO: "https://codeberg.org/api/v1",
}
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_ENV_NAME = re.compile(re.escape(ENV_PREFIX) + r"[A-Z0-9_]{1,80}")
_MIN_SECRET = 16
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def generate_secret() -> str:
    return pysecrets.token_urlsafe(32)


def check_repository(provider: str, value: str) -> str:
    value = value.strip().strip("/")
    parts = value.split("/")
    nested = provider == Connection.Provider.GITLAB
    shape = ('"owner/name", or for GitLab the full project path ("group/subgroup/project")'
             if nested else '"owner/name"')
    if (len(parts) < 2 or (len(parts) > 2 and not nested) or len(parts) > 20
            or not all(_SEGMENT.fullmatch(p) and p not in (".", "..") for p in parts)):
        raise forms.ValidationError(
            f"Give the repository as {shape}: letters, digits, '.', '-' and '_' only "
            "(not its web address).")
    return value


def check_api_url(value: str, *, staff: bool) -> str:
    value = value.strip()
    if _CONTROL.search(value):
        raise forms.ValidationError("The API base URL may not contain spaces or control "
                                    "characters.")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise forms.ValidationError("The API base URL is not a valid address.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise forms.ValidationError("The API base URL must start with https:// (or http://) "
                                    "and name a host.")
    if "@" in parts.netloc:
        raise forms.ValidationError("The API base URL may not contain a user name or password: "
                                    "give the token in its own field.")
    if parts.fragment or "#" in value or parts.query:
        raise forms.ValidationError("The API base URL may not have a query (?…) or a "
                                    "fragment (#…).")
    if not staff:
        hosts = settings.QUORUM_PROVIDER_HOSTS
        if parts.scheme != "https" or parts.hostname.lower() not in hosts or \
                port not in (None, 443):
            raise forms.ValidationError(
                "You may connect only to " + ", ".join(hosts) + " over https; ask a staff "
                "member to add a connection to a self-hosted instance.")
    return value.rstrip("/")


class SecretSources:
    """The checks of a secret given either pasted or as an environment variable's name
    (connections and GitHub Apps alike)."""

    cleaned_data: dict

    def _env(self, name: str) -> str:
        value = self.cleaned_data.get(name, "").strip()
        if value and not _ENV_NAME.fullmatch(value):
            raise forms.ValidationError(
                f"Name an environment variable starting with {ENV_PREFIX} (capital letters, "
                "digits and _ only): other variables are never read for a connection.")
        return value

    def _pasted(self, name: str, what: str, minimum: int = 1) -> str:
        value = self.cleaned_data.get(name, "")
        if value and _CONTROL.search(value):
            raise forms.ValidationError(f"The {what} may not contain spaces or control "
                                        "characters.")
        if value and len(value) < minimum:
            raise forms.ValidationError(f"The {what} must be at least {minimum} characters.")
        return value


class ConnectionForm(SecretSources, forms.ModelForm):
    api_url = forms.CharField(required=False, max_length=300, label="API base URL",
                              help_text="Empty: the provider's public service ("
                              + ", ".join(DEFAULT_API_URLS.values()) + ").")
    # The model's defaults as the fields' initial values: a new connection's form starts
    # from them (a ModelForm without an instance takes none from the model).
    auto_min_severity = forms.ChoiceField(
        choices=[(s, s) for s in SEVERITIES], label="Automatic publishing: minimum severity",
        initial=Connection._meta.get_field("auto_min_severity").default)
    auto_min_confidence = forms.FloatField(min_value=0, max_value=1,
                                           initial=Connection._meta.get_field(
                                               "auto_min_confidence").default,
                                           label="Automatic publishing: minimum confidence",
                                           widget=forms.NumberInput(attrs={"step": "0.05"}))
    token = forms.CharField(required=False, max_length=1000, label="Token",
                            widget=forms.PasswordInput(render_value=False,
                                                       attrs={"autocomplete": "off"}))
    token_env = forms.CharField(required=False, max_length=100,
                                label="…or the environment variable holding it",
                                widget=forms.TextInput(attrs={
                                    "placeholder": ENV_PREFIX + "MYREPO_TOKEN"}))
    secret = forms.CharField(required=False, max_length=1000, label="Webhook secret",
                             widget=forms.PasswordInput(render_value=False,
                                                        attrs={"autocomplete": "off"}))
    secret_env = forms.CharField(required=False, max_length=100,
                                 label="…or the environment variable holding it",
                                 widget=forms.TextInput(attrs={
                                     "placeholder": ENV_PREFIX + "MYREPO_SECRET"}))

    class Meta:
        model = Connection
        # The API URL and the secrets' sources are set in save(): a model field listed here
        # would be overwritten by its empty form value (and URLField's validator refuses a
        # host without a dot, like a self-hosted "http://forgejo:3000").
        fields = ["provider", "repository", "publish_policy", "auto_min_severity",
                  "auto_min_confidence", "status_comment", "commit_status", "active"]

    field_order = ["provider", "repository", "api_url", "token", "token_env", "secret",
                   "secret_env", "publish_policy", "auto_min_severity", "auto_min_confidence",
                   "status_comment", "commit_status", "active"]

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.generated_secret = ""
        self.creating = self.instance.pk is None
        if self.creating:  # a team's connection, for one of the teams this person runs
            from agents_app.teams.fields import FIELD, add_team_field
            from agents_app.teams.models import Role, Team

            add_team_field(self, user)
            if FIELD in self.fields:
                self.fields[FIELD].queryset = Team.objects.filter(
                    memberships__user=user, memberships__role=Role.ADMIN).order_by("name")
                self.fields[FIELD].help_text = ("Its reviews are the team's: its members see "
                                                "them, its approvers decide them. Teams you "
                                                "are an admin of.")
                if not self.fields[FIELD].queryset.exists():
                    del self.fields[FIELD]
        # The stored source is shown on the page, never put back in a field: an empty pair
        # keeps it.
        self.initial["token_env"] = ""
        self.initial["secret_env"] = ""
        if self.creating:
            self.initial["api_url"] = ""
            self.fields["secret"].help_text = ("Empty (and no variable): Quorum generates a "
                                               "strong secret and shows it once.")
        else:
            self.initial["api_url"] = self.instance.api_url
            self.fields["token"].help_text = "Empty: keep the stored token."
            self.fields["secret"].help_text = "Empty: keep the stored secret."

    def clean_repository(self):
        return self.cleaned_data["repository"].strip()

    def clean_token_env(self):
        return self._env("token_env")

    def clean_secret_env(self):
        return self._env("secret_env")

    def clean_token(self):
        return self._pasted("token", "token")

    def clean_secret(self):
        return self._pasted("secret", "webhook secret", _MIN_SECRET)

    def clean(self):
        data = super().clean()
        provider = data.get("provider")
        if provider and data.get("repository"):
            try:
                data["repository"] = check_repository(provider, data["repository"])
            except forms.ValidationError as exc:
                self.add_error("repository", exc)
        if provider:
            url = data.get("api_url") or DEFAULT_API_URLS[provider]
            try:
                data["api_url"] = check_api_url(url, staff=self.user.is_staff)
            except forms.ValidationError as exc:
                self.add_error("api_url", exc)
        for field, env, what in (("token", "token_env", "token"),
                                 ("secret", "secret_env", "webhook secret")):
            if data.get(field) and data.get(env):
                self.add_error(env, f"Either paste the {what} or name a variable, not both.")
        if self.creating and not data.get("token") and not data.get("token_env") \
                and "token" not in self.errors and "token_env" not in self.errors:
            self.add_error("token", "Paste a token or name the environment variable that "
                                    "holds it.")
        if provider and data.get("repository") and data.get("api_url") and not (
                {"repository", "api_url"} & set(self.errors)):
            dup = Connection.objects.filter(
                owner=self.user, provider=provider, api_url=data["api_url"],
                repository__iexact=data["repository"]).exclude(pk=self.instance.pk)
            if dup.exists():
                self.add_error("repository", "You already have a connection to this "
                                             "repository: edit that one.")
        return data

    def _apply(self, conn, kind: str, value: str, env: str) -> None:
        if env:
            setattr(conn, f"{kind}_env", env)
            setattr(conn, f"{kind}_sealed", "")
            setattr(conn, f"{kind}_hint", "")
        elif value:
            setattr(conn, f"{kind}_env", "")
            setattr(conn, f"{kind}_sealed", sealed.seal(value))
            setattr(conn, f"{kind}_hint", sealed.hint(value))

    def save(self, commit=True):
        conn = super().save(commit=False)
        if self.creating:
            conn.owner = self.user
            conn.team = self.cleaned_data.get("sharing")
        data = self.cleaned_data
        if data.get("token") or data.get("token_env") or conn.api_url != data["api_url"] \
                or conn.provider != self.initial.get("provider", conn.provider):
            conn.bot_login = ""  # another account (or host): asked of the provider again
        conn.api_url = data["api_url"]
        self._apply(conn, "token", data.get("token", ""), data.get("token_env", ""))
        secret = data.get("secret", "")
        if self.creating and not secret and not data.get("secret_env"):
            secret = self.generated_secret = generate_secret()
        self._apply(conn, "secret", secret, data.get("secret_env", ""))
        if commit:
            conn.save()
        return conn


# --- GitHub Apps ----------------------------------------------------------------------------
_APP_ID = re.compile(r"[0-9]{1,20}")
MAX_KEY_CHARS = 10_000


def key_fingerprint(pem: str) -> str:
    """``SHA256:…`` of the key's public half, to tell keys apart on the page (never the key)."""
    import base64
    import hashlib

    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(pem.encode("utf-8"), password=None)
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return "SHA256:" + base64.b64encode(hashlib.sha256(der).digest()).decode()[:20] + "…"


class GitHubAppForm(SecretSources, forms.ModelForm):
    api_url = forms.CharField(required=False, max_length=300, label="API base URL",
                              help_text="Empty: https://api.github.com (GitHub Enterprise: "
                                        "https://github.example.org/api/v3).")
    private_key = forms.CharField(
        required=False, max_length=MAX_KEY_CHARS, label="Private key (.pem)",
        widget=forms.Textarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false",
                                     "placeholder": "-----BEGIN RSA PRIVATE KEY-----"}))
    key_env = forms.CharField(required=False, max_length=100,
                              label="…or the environment variable holding it",
                              widget=forms.TextInput(attrs={
                                  "placeholder": ENV_PREFIX + "MYAPP_KEY"}))
    secret = forms.CharField(required=False, max_length=1000, label="Webhook secret",
                             widget=forms.PasswordInput(render_value=False,
                                                        attrs={"autocomplete": "off"}))
    secret_env = forms.CharField(required=False, max_length=100,
                                 label="…or the environment variable holding it",
                                 widget=forms.TextInput(attrs={
                                     "placeholder": ENV_PREFIX + "MYAPP_SECRET"}))
    publish_policy = forms.ChoiceField(choices=Connection.Policy.choices,
                                       initial=Connection.Policy.AFTER_TRIAGE,
                                       label="Publishing, for the repositories it is installed on")

    class Meta:
        model = GitHubApp
        fields = ["app_id", "publish_policy", "active"]

    field_order = ["app_id", "api_url", "private_key", "key_env", "secret", "secret_env",
                   "publish_policy", "active"]

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.generated_secret = ""
        self.creating = self.instance.pk is None
        self.initial["key_env"] = ""
        self.initial["secret_env"] = ""
        self.initial["api_url"] = "" if self.creating else self.instance.api_url
        self.fields["app_id"].label = "App ID"
        self.fields["app_id"].help_text = "The App ID on the App's settings page (digits)."
        if self.creating:
            self.fields["secret"].help_text = ("Empty (and no variable): Quorum generates a "
                                               "strong secret and shows it once.")
        else:
            self.fields["private_key"].help_text = "Empty: keep the stored key."
            self.fields["secret"].help_text = "Empty: keep the stored secret."

    def clean_app_id(self):
        value = str(self.cleaned_data.get("app_id") or "").strip()
        if not _APP_ID.fullmatch(value):
            raise forms.ValidationError("The App ID is a number (on the App's settings page, "
                                        "under “About”).")
        return value

    def clean_key_env(self):
        return self._env("key_env")

    def clean_secret_env(self):
        return self._env("secret_env")

    def clean_private_key(self):
        value = self.cleaned_data.get("private_key", "")
        if not value.strip():
            return ""
        if "\x00" in value:
            raise forms.ValidationError("The key contains a NUL byte: paste the .pem file's "
                                        "text as it is.")
        value = value.replace("\r\n", "\n").strip() + "\n"
        from reviews_app.hosting.base import HostError
        from reviews_app.hosting.github_app import app_jwt

        try:
            app_jwt("1", value)
            self.fingerprint = key_fingerprint(value)
        except (HostError, ValueError, TypeError):
            raise forms.ValidationError(
                "This is not a private key GitHub made for an App: paste the whole .pem file "
                "(from “-----BEGIN RSA PRIVATE KEY-----” to its END line).") from None
        return value

    def clean_secret(self):
        return self._pasted("secret", "webhook secret", _MIN_SECRET)

    def clean(self):
        data = super().clean()
        url = data.get("api_url") or DEFAULT_API_URLS[Connection.Provider.GITHUB]
        try:
            data["api_url"] = check_api_url(url, staff=self.user.is_staff)
        except forms.ValidationError as exc:
            self.add_error("api_url", exc)
        for field, env, what in (("private_key", "key_env", "private key"),
                                 ("secret", "secret_env", "webhook secret")):
            if data.get(field) and data.get(env):
                self.add_error(env, f"Either paste the {what} or name a variable, not both.")
        if self.creating and not data.get("private_key") and not data.get("key_env") and \
                not {"private_key", "key_env"} & set(self.errors):
            self.add_error("private_key", "Paste the App's private key or name the environment "
                                          "variable that holds it.")
        if data.get("app_id") and data.get("api_url") and "api_url" not in self.errors:
            dup = GitHubApp.objects.filter(owner=self.user, api_url=data["api_url"],
                                           app_id=data["app_id"]).exclude(pk=self.instance.pk)
            if dup.exists():
                self.add_error("app_id", "You have connected this App already: edit it.")
        return data

    def save(self, commit=True):
        app = super().save(commit=False)
        if self.creating:
            app.owner = self.user
        data = self.cleaned_data
        if app.api_url != data["api_url"] or data.get("private_key") or data.get("key_env"):
            app.slug = ""  # asked of GitHub again
        app.api_url = data["api_url"]
        if data.get("key_env"):
            app.key_env, app.key_sealed, app.key_hint = data["key_env"], "", ""
        elif data.get("private_key"):
            app.key_env, app.key_sealed = "", sealed.seal(data["private_key"])
            app.key_hint = self.fingerprint
        secret = data.get("secret", "")
        if self.creating and not secret and not data.get("secret_env"):
            secret = self.generated_secret = generate_secret()
        if data.get("secret_env"):
            app.secret_env, app.secret_sealed, app.secret_hint = data["secret_env"], "", ""
        elif secret:
            app.secret_env, app.secret_sealed = "", sealed.seal(secret)
            app.secret_hint = sealed.hint(secret)
        if commit:
            app.save()
        return app
