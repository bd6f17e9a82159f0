"""The notification settings' forms: what a person receives, and a new endpoint."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from django import forms

from common import sealed

from ..teams.models import Role, Team
from .models import Endpoint, Kind

MAX_URL = 2000
KIND_CHOICES = [(k.value, k.label) for k in Kind]


class PreferenceForm(forms.Form):
    email_kinds = forms.MultipleChoiceField(choices=KIND_CHOICES, required=False,
                                            widget=forms.CheckboxSelectMultiple,
                                            label="By email")
    webhook_kinds = forms.MultipleChoiceField(choices=KIND_CHOICES, required=False,
                                              widget=forms.CheckboxSelectMultiple,
                                              label="To my own endpoints")


def new_secret() -> str:
    """A Standard Webhooks secret: "whsec_" and 32 random bytes in base64."""
    import base64

    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def url_hint(style: str, url: str) -> str:
    """What the page shows of an address (the whole one may be a credential): the scheme and
    host of a signed endpoint, the scheme and last four characters of a chat one."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not readable as a URL (a form refuses it before it is saved)
        return "…"
    if style == Endpoint.Style.SIGNED:
        return f"{parts.scheme}://{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}/…"[:120]
    return f"{parts.scheme}://…{url[-4:]}"[:120]


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True,
                           error_messages={"required": "Give the endpoint a name.",
                                           "max_length": "A name has at most 100 characters."})
    style = forms.ChoiceField(choices=Endpoint.Style.choices, initial=Endpoint.Style.SIGNED)
    url = forms.CharField(label="Address", max_length=MAX_URL, strip=True,
                          help_text="Signed: an http or https URL that takes a POST. Chat: an "
                                    "Apprise URL, e.g. slack://…, msteams://…, discord://…, "
                                    "mmost://…, ntfy://…",
                          error_messages={"required": "Enter the endpoint's address.",
                                          "max_length": f"An address has at most {MAX_URL:,} "
                                                        "characters."})
    kinds = forms.MultipleChoiceField(choices=KIND_CHOICES, required=False,
                                      widget=forms.CheckboxSelectMultiple,
                                      label="Messages it receives",
                                      help_text="None ticked: all of them.")
    team = forms.ModelChoiceField(queryset=Team.objects.none(), required=False,
                                  empty_label="Mine alone",
                                  help_text="A team you administer: its gates' messages go to "
                                            "this endpoint.")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["team"].queryset = admin_teams(user)
        if not self.fields["team"].queryset.exists():
            del self.fields["team"]
        self.generated_secret: str | None = None  # a signed endpoint's, once saved

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        if any(c.isspace() or ord(c) < 32 for c in url):
            raise forms.ValidationError("An address has no spaces or control characters.")
        return url

    def clean(self):
        data = super().clean()
        url, style = data.get("url"), data.get("style")
        if not url or not style:
            return data
        if style == Endpoint.Style.SIGNED:
            try:
                parts = urlsplit(url)
            except ValueError:  # brackets around something that is not an IPv6 address
                self.add_error("url", "This address cannot be read: check its host (an IPv6 "
                                      "address goes in brackets, [2001:db8::1]).")
                return data
            try:
                parts.port  # noqa: B018 - raises on a port that is not a number
            except ValueError:
                self.add_error("url", "The port is not a number from 0 to 65535.")
                return data
            if parts.scheme not in ("http", "https") or not parts.hostname:
                self.add_error("url", "A signed endpoint's address starts with https:// (or "
                                      "http://) and names a host.")
            elif not _host_fits_dns(parts.hostname):
                self.add_error("url", "This host name is too long to exist: at most 253 "
                                      "characters, and at most 63 between two dots.")
            elif parts.username or parts.password:
                self.add_error("url", "Put no user name or password in the address: the "
                                      "signature proves the message comes from Quorum.")
            elif _literal_never_called(parts.hostname):
                self.add_error("url", "This address is link-local, multicast or reserved (a "
                                      "cloud's metadata service, say): no webhook is ever sent "
                                      "there.")
        else:
            import apprise

            if apprise.Apprise.instantiate(url) is None:
                self.add_error("url", "Apprise does not understand this address. Chat addresses "
                                      "look like slack://…, msteams://…, discord://…, "
                                      "mmost://host/token, ntfy://topic or json://host/path.")
        return data

    def save(self) -> Endpoint:
        data = self.cleaned_data
        secret = new_secret() if data["style"] == Endpoint.Style.SIGNED else None
        ep = Endpoint.objects.create(
            owner=self.user, team=data.get("team"), name=data["name"], style=data["style"],
            url_sealed=sealed.seal(data["url"]), url_hint=url_hint(data["style"], data["url"]),
            secret_sealed=sealed.seal(secret) if secret else "",
            kinds=list(data.get("kinds") or []) or [k.value for k in Kind])
        self.generated_secret = secret
        return ep


def admin_teams(user):
    return Team.objects.filter(memberships__user=user, memberships__role=Role.ADMIN)


def _host_fits_dns(host: str) -> bool:
    """A name DNS could hold (RFC 1035: 253 characters, 63 a label), or an address literal."""
    if host.startswith("[") or ":" in host:  # an IPv6 literal (urlsplit drops the brackets)
        return len(host) <= 45
    labels = host.rstrip(".").split(".")
    return len(host) <= 253 and all(len(label) <= 63 for label in labels)


def _literal_never_called(host: str) -> bool:
    """A host written as an address that the sender would refuse (no lookup here: a name is
    checked when it is called, since what it resolves to may change)."""
    import ipaddress

    from .deliver import never_called

    try:
        return never_called(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return False
