from django.urls import path

from . import (
    converters,  # noqa: F401 - registers <id:...>
    experiment_views,
    fork_views,
    inbox_views,
    usage_views,
    views,
)
from .gates import urls as gates_urls
from .notify import urls as notify_urls
from .patterns import PATTERNS
from .patterns.registry import part_of
from .teams import urls as teams_urls

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/new/", views.start_run, name="start_run"),
    path("runs/<id:pk>/", views.run_detail, name="run_detail"),
    path("runs/<id:pk>/cancel/", views.cancel_run, name="cancel_run"),
    path("runs/<id:pk>/events/", views.run_events, name="run_events"),
    path("runs/<id:pk>/calls/<id:call>/", views.model_call, name="model_call"),
    path("runs/<id:pk>/trace/", views.run_trace, name="run_trace"),
    path("runs/<id:pk>/fork/", fork_views.fork_page, name="fork_page"),
    path("runs/<id:pk>/fork/<id:seq>/", fork_views.fork_form, name="fork_form"),
    path("runs/<id:pk>/again/", fork_views.fork_shortcut, {"kind": "again"}, name="run_again"),
    path("runs/<id:pk>/replay/", fork_views.fork_shortcut, {"kind": "replay"},
         name="replay_run"),
    path("runs/<id:pk>/continue/", fork_views.fork_shortcut, {"kind": "continue"},
         name="continue_run"),
    path("runs/compare/", fork_views.compare_runs, name="compare_runs"),
    path("inbox/", inbox_views.inbox_page, name="inbox"),
    path("inbox/decide/", inbox_views.inbox_decide, name="inbox_decide"),
    path("experiments/", experiment_views.experiment_list, name="experiment_list"),
    path("experiments/new/", experiment_views.experiment_new, name="experiment_new"),
    path("experiments/prompts/", experiment_views.judge_prompts, name="judge_prompts"),
    path("experiments/<id:pk>/", experiment_views.experiment_detail, name="experiment_detail"),
    path("experiments/<id:pk>/cancel/", experiment_views.experiment_cancel,
         name="experiment_cancel"),
    path("experiments/<id:pk>/charts/<str:name>.svg", experiment_views.experiment_chart,
         name="experiment_chart"),
    path("experiments/<id:pk>/export.csv", experiment_views.experiment_export, {"fmt": "csv"},
         name="experiment_csv"),
    path("experiments/<id:pk>/export.json", experiment_views.experiment_export,
         {"fmt": "json"}, name="experiment_json"),
    path("datasets/new/", experiment_views.dataset_new, name="dataset_new"),
    path("datasets/from-history/", experiment_views.dataset_from_history,
         name="dataset_from_history"),
    path("datasets/<id:pk>/", experiment_views.dataset_detail, name="dataset_detail"),
    path("usage/", usage_views.usage_page, name="usage"),
    path("usage/export.csv", usage_views.usage_csv, name="usage_csv"),
]

# Teams, shared gates and notifications (issue 35): each package brings its own URLs.
urlpatterns += teams_urls.urlpatterns + gates_urls.urlpatterns + notify_urls.urlpatterns


# Each pattern package may bring the URLs of its gates and pages (its ``urls.py``).
for _pattern in PATTERNS.values():
    if (_urls := part_of(_pattern, "urls")) is not None:
        urlpatterns += _urls.urlpatterns
