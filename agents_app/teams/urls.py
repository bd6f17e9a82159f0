"""The team pages (issue 35): teams, their members and their gate rules."""

from django.urls import path

from . import views

urlpatterns = [
    path("teams/", views.team_list, name="team_list"),
    path("teams/new/", views.team_new, name="team_new"),
    path("teams/<id:pk>/", views.team_page, name="team"),
    path("teams/<id:pk>/leave/", views.team_leave, name="team_leave"),
    path("teams/<id:pk>/delete/", views.team_delete, name="team_delete"),
    path("teams/<id:pk>/members/add/", views.team_member_add, name="team_member_add"),
    path("teams/<id:pk>/members/<id:user>/role/", views.team_member_role,
         name="team_member_role"),
    path("teams/<id:pk>/members/<id:user>/remove/", views.team_member_remove,
         name="team_member_remove"),
    path("teams/<id:pk>/rules/new/", views.team_rule_new, name="team_rule_new"),
    path("teams/<id:pk>/rules/<id:rule>/", views.team_rule_edit, name="team_rule_edit"),
    path("teams/<id:pk>/rules/<id:rule>/delete/", views.team_rule_delete,
         name="team_rule_delete"),
    path("teams/<id:pk>/rules/<id:rule>/move/", views.team_rule_move, name="team_rule_move"),
]
