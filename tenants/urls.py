from django.urls import path

from tenants import api

app_name = "tenants"

urlpatterns = [
    path("tenants/<slug:tenant_slug>/", api.TenantDetailApi.as_view(), name="tenant-detail"),
    path("tenants/<slug:tenant_slug>/groups/", api.GroupListApi.as_view(), name="group-list"),
    path("tenants/<slug:tenant_slug>/keys/", api.ApiKeyListApi.as_view(), name="key-list"),
    path("tenants/<slug:tenant_slug>/keys/<uuid:key_id>/", api.ApiKeyDetailApi.as_view(), name="key-detail"),
    path(
        "tenants/<slug:tenant_slug>/groups/<slug:group_name>/members/",
        api.GroupMembersApi.as_view(),
        name="group-members",
    ),
    path(
        "tenants/<slug:tenant_slug>/groups/<slug:group_name>/members/<str:username>/",
        api.GroupMemberApi.as_view(),
        name="group-member",
    ),
]
