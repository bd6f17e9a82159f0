"""ASGI entry point: HTTP through Django, WebSockets through Channels.

A setting that is missing or out of range stops the server here, as it stops ``manage.py``:
one line on stderr naming it, exit 2, no traceback (Daphne imports this module before it
listens). The patterns' option settings are checked too, as a worker checks them."""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

try:
    django_asgi_app = get_asgi_application()
    from agents_app.option_fields import check_pattern_settings

    check_pattern_settings()
except ImproperlyConfigured as exc:
    from config.env import one_line

    sys.stderr.write(f"quorum: {one_line(exc)}\n")
    raise SystemExit(2) from None

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agents_app.routing import websocket_urlpatterns  # noqa: E402
from config.origin import SameOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
