from django.urls import path

from tenants import views

app_name = "workspace"
T = "t/<slug:tenant_slug>/"

urlpatterns = [
    path("tenants/new/", views.tenant_new, name="tenant-new"),  # operators
    path("tenants/<slug:tenant_slug>/join/", views.tenant_join, name="tenant-join"),  # operators
    path("invitations/<str:token>/", views.invitation_accept, name="invitation-accept"),  # whoever holds the link
    path(f"{T}members/", views.members, name="members"),  # tenant admins
    path(f"{T}members/<uuid:membership_id>/", views.member_change, name="member-change"),
    path(f"{T}invitations/<uuid:invitation_id>/", views.invitation_change, name="invitation-change"),
    path(f"{T}groups/", views.group_change, name="group-change"),  # tenant admins
    path(f"{T}keys/", views.api_keys, name="api-keys"),  # tenant admins
    path(f"{T}keys/<uuid:key_id>/revoke/", views.api_key_revoke, name="api-key-revoke"),
]
