from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import fix_views, memory_views, rule_views, views
from .calibration import views as calibration_views
from .publishing import views as publishing_views

urlpatterns = [
    path("", views.review_list, name="review_list"),
    path("new/", views.start_review, name="start_review"),
    path("calibration/", calibration_views.calibration, name="review_calibration"),
    path("<id:pk>/", views.review_detail, name="review_detail"),
    path("<id:pk>/findings/<str:key>/", views.finding_decision, name="finding_decision"),
    path("<id:pk>/accept-all/", views.accept_all, name="accept_all"),
    path("<id:pk>/settle/", views.settle_rest, name="settle_rest"),
    path("<id:pk>/verdict/", views.verdict_decision, name="verdict_decision"),
    path("<id:pk>/reopen/", views.reopen_triage, name="reopen_triage"),
    path("<id:pk>/publish/", publishing_views.publish_now, name="publish_review"),
    path("<id:pk>/apply-fixes/", fix_views.apply_fixes, name="review_apply_fixes"),
    path("<id:pk>/export/", views.export_review, name="export_review"),
    path("<id:pk>/files/<id:index>/", views.review_file, name="review_file"),
    path("memories/", memory_views.memory_list, name="memory_list"),
    path("memories/<id:pk>/edit/", memory_views.memory_edit, name="memory_edit"),
    path("memories/<id:pk>/approve/", memory_views.memory_approve, name="memory_approve"),
    path("memories/<id:pk>/retire/", memory_views.memory_retire, name="memory_retire"),
    path("memories/<id:pk>/restore/", memory_views.memory_restore, name="memory_restore"),
    path("rules/", rule_views.rule_list, name="review_rules"),
    path("rules/new/", rule_views.rule_new, name="rule_new"),
    path("rules/suggest/", rule_views.rule_suggest, name="rule_suggest"),
    path("rules/<id:pk>/edit/", rule_views.rule_edit, name="rule_edit"),
    path("rules/<id:pk>/approve/", rule_views.rule_approve, name="rule_approve"),
    path("rules/<id:pk>/retire/", rule_views.rule_retire, name="rule_retire"),
    path("rules/<id:pk>/restore/", rule_views.rule_restore, name="rule_restore"),
    path("rules/<id:pk>/delete/", rule_views.rule_delete, name="rule_delete"),
]
