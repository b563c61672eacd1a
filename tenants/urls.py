from django.urls import path

from tenants import api

app_name = "tenants"

urlpatterns = [
    path("tenants/<slug:tenant_slug>/", api.TenantDetailApi.as_view(), name="tenant-detail"),
]
