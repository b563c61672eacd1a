from django.contrib import admin
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from chat.urls import api_urlpatterns as chat_api
from chat.urls import openai_urlpatterns as openai_api
from core.language import switch_language
from identity.signin import SignInView
from inference.views import health
from tenants.views import ThrottledPasswordResetView, home

admin.site.site_header = "ragsite administration"
admin.site.site_title = "ragsite"

urlpatterns = [
    path("", home, name="home"),
    path("healthz", health, name="health"),  # public: the web is up; the chat model's state
    path("language/<str:code>/", switch_language, name="switch-language"),  # the switch on every page
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),  # the chat page's words (gettext)
    # Django's own reset views; the request form throttled (tenants/views.py), never saying whether an address exists.
    path("accounts/password_reset/", ThrottledPasswordResetView.as_view(), name="password_reset"),
    path("accounts/login/", SignInView.as_view(), name="login"),  # a password, or the workspace's providers
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include("tenants.urls")),
    path("api/v1/", include("knowledge.urls")),
    path("api/v1/", include("agent_sessions.urls")),  # retrieve, bootstrap, sessions: the agent doors
    path("api/v1/", include((chat_api, "chat-api"))),
    path("api/v1/", include("feedback.urls_api")),
    path("api/v1/", include("identity.urls")),  # SCIM 2.0 provisioning (docs/identity.md)
    path("v1/", include((openai_api, "openai"))),  # OpenAI-compatible: base URL <server>/v1 (docs/openai.md)
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("tenants.urls_pages")),
    path("", include("identity.urls_pages")),
    path("", include("identity.urls_sso")),  # sign-in through OpenID Connect or SAML (docs/identity.md)
    path("", include("chat.urls")),
    path("", include("knowledge.urls_pages")),
    path("", include("feedback.urls")),
    path("", include("insights.urls")),
]

handler400 = "core.errors.bad_request"
handler403 = "core.errors.permission_denied"
handler404 = "core.errors.page_not_found"
handler500 = "core.errors.server_error"
