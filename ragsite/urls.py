from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import include, path


def home(request: HttpRequest) -> HttpResponse:
    return redirect("admin:index")


admin.site.site_header = "ragsite administration"
admin.site.site_title = "ragsite"

urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("tenants.urls")),
]
