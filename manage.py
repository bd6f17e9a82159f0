#!/usr/bin/env python
import gc
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting missing or wrong (no SECRET_KEY outside DEBUG, a bad DATABASE_URL): what
        # to set, on one line, rather than Django's traceback.
        sys.stderr.write("manage.py: " + " ".join(str(exc).split()) + "\n")
        sys.exit(2)
    finally:
        # The process ends here: its teardown need not walk every object it made (the final
        # collections took a tenth of a second or more after a command's output).
        gc.freeze()
