#!/usr/bin/env python
import gc
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if sys.argv[1:2] == ["review"]:
        # Its analyzers' slowest starts (bandit's and detect-secrets' imports) run while
        # Django loads (common/prewarm.py).
        from common import prewarm

        prewarm.for_review(sys.argv[2:])
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        from django.conf import settings

        settings.INSTALLED_APPS  # noqa: B018  (reads config/settings.py: a bad value stops here)
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting missing or wrong (config/env.py says what it takes): one line, not
        # Django's traceback, and not a pointer to a traceback that is not shown.
        from config.env import one_line

        sys.stderr.write(f"manage.py: {one_line(exc)}\n")
        sys.exit(2)
    finally:
        # The process ends here: its teardown need not walk every object it made (the final
        # collections took a tenth of a second or more after a command's output).
        gc.freeze()
