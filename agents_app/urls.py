from importlib import import_module

from django.urls import path

from . import (
    change_views,
    converters,  # noqa: F401 - registers <id:...>
    views,
)
from .patterns import PATTERNS

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/new/", views.start_run, name="start_run"),
    path("runs/<id:pk>/", views.run_detail, name="run_detail"),
    path("runs/<id:pk>/plan/", views.plan_decision, name="plan_decision"),
    path("runs/<id:pk>/cancel/", views.cancel_run, name="cancel_run"),
    path("runs/<id:pk>/calls/<id:call>/", views.model_call, name="model_call"),
    path("changes/", change_views.change_list, name="change_list"),
    path("changes/new/", change_views.change_new, name="change_new"),
    path("changes/<id:pk>/", change_views.change_detail, name="change_detail"),
    path("changes/<id:pk>/decide/", change_views.change_decision, name="change_decision"),
    path("changes/<id:pk>/files/<id:index>/", change_views.change_file, name="change_file"),
]


# Each pattern package may bring the URLs of its gates and pages (its ``urls.py``).
for _pattern in PATTERNS.values():
    try:
        _module = import_module(f"{_pattern.package}.urls")
    except ModuleNotFoundError as exc:
        if exc.name != f"{_pattern.package}.urls":
            raise
        continue
    urlpatterns += _module.urlpatterns
