from django.urls import path

from . import views

urlpatterns = [
    path("changes/", views.change_list, name="change_list"),
    path("changes/new/", views.change_new, name="change_new"),
    path("changes/<id:pk>/", views.change_detail, name="change_detail"),
    path("changes/<id:pk>/decide/", views.change_decision, name="change_decision"),
    path("changes/<id:pk>/files/<id:index>/", views.change_file, name="change_file"),
]
