from django.urls import path, re_path

from identity import api, scim

app_name = "identity"
S = "tenants/<slug:tenant_slug>/scim/v2/"

urlpatterns = [
    path(f"{S}Users", api.ResourcesApi.as_view(kind=scim.USERS), name="scim-users"),
    path(f"{S}Users/.search", api.SearchApi.as_view(kind=scim.USERS), name="scim-users-search"),
    path(f"{S}Users/<str:scim_id>", api.ResourceApi.as_view(kind=scim.USERS), name="scim-user"),
    path(f"{S}Groups", api.ResourcesApi.as_view(kind=scim.GROUPS), name="scim-groups"),
    path(f"{S}Groups/.search", api.SearchApi.as_view(kind=scim.GROUPS), name="scim-groups-search"),
    path(f"{S}Groups/<str:scim_id>", api.ResourceApi.as_view(kind=scim.GROUPS), name="scim-group"),
    path(f"{S}.search", api.RootSearchApi.as_view(), name="scim-search"),
    path(f"{S}ServiceProviderConfig", api.ServiceProviderConfigApi.as_view(), name="scim-config"),
    path(f"{S}ResourceTypes", api.ResourceTypesApi.as_view(), name="scim-resource-types"),
    path(f"{S}ResourceTypes/<str:name>", api.ResourceTypesApi.as_view(), name="scim-resource-type"),
    path(f"{S}Schemas", api.SchemasApi.as_view(), name="scim-schemas"),
    re_path(
        r"^tenants/(?P<tenant_slug>[-\w]+)/scim/v2/Schemas/(?P<urn>[^/]+)$",
        api.SchemasApi.as_view(),
        name="scim-schema",
    ),  # fmt: skip
    re_path(r"^tenants/(?P<tenant_slug>[-\w]+)/scim/v2/(?P<rest>.*)$", api.NotFoundApi.as_view(), name="scim-missing"),
]
