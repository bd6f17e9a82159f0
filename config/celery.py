"""The Celery application. Tasks are found in each app's ``tasks`` module."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# LiteLLM would otherwise download its price map at import time.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

app = Celery("quorum")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
