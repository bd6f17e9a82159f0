from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import views
from .calibration import views as calibration_views
from .fixes import urls as fixes_urls
from .memories import urls as memories_urls
from .prflow import urls as prflow_urls
from .rules import urls as rules_urls
from .triage import urls as triage_urls

# The review pages; each feature package (triage, prflow, fixes, memories, rules) brings its own
# URLs, in the order they always had.
urlpatterns = [
    path("", views.review_list, name="review_list"),
    path("new/", views.start_review, name="start_review"),
    path("calibration/", calibration_views.calibration, name="review_calibration"),
    path("<id:pk>/", views.review_detail, name="review_detail"),
    *triage_urls.urlpatterns,
    *prflow_urls.urlpatterns,
    *fixes_urls.urlpatterns,
    path("<id:pk>/export/", views.export_review, name="export_review"),
    path("<id:pk>/files/<id:index>/", views.review_file, name="review_file"),
    *memories_urls.urlpatterns,
    *rules_urls.urlpatterns,
]
