from django.urls import path

from tenants import views

app_name = "workspace"
T = "t/<slug:tenant_slug>/"

urlpatterns = [
    path("tenants/new/", views.tenant_new, name="tenant-new"),  # operators
    path(f"{T}members/", views.members, name="members"),  # tenant admins
    path(f"{T}members/<uuid:membership_id>/", views.member_change, name="member-change"),
    path(f"{T}groups/", views.group_change, name="group-change"),  # tenant admins
]
