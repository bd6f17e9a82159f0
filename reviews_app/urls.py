from django.urls import path

from . import views

urlpatterns = [
    path("", views.review_list, name="review_list"),
    path("new/", views.start_review, name="start_review"),
    path("<int:pk>/", views.review_detail, name="review_detail"),
    path("<int:pk>/findings/<str:key>/", views.finding_decision, name="finding_decision"),
    path("<int:pk>/accept-all/", views.accept_all, name="accept_all"),
    path("<int:pk>/settle/", views.settle_rest, name="settle_rest"),
    path("<int:pk>/verdict/", views.verdict_decision, name="verdict_decision"),
    path("<int:pk>/reopen/", views.reopen_triage, name="reopen_triage"),
    path("<int:pk>/export/", views.export_review, name="export_review"),
    path("<int:pk>/files/<int:index>/", views.review_file, name="review_file"),
]
