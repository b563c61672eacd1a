from django.urls import path

from identity import signin

app_name = "sso"
P = "sso/<slug:tenant_slug>/<slug:provider_slug>/"

urlpatterns = [  # public: anyone may start a sign-in; the provider decides who finishes it
    path("sso/<slug:tenant_slug>/", signin.providers, name="providers"),
    path(P, signin.start, name="start"),
    path(f"{P}callback/", signin.oidc_callback, name="oidc-callback"),
    path(f"{P}saml/acs/", signin.saml_acs, name="saml-acs"),
    path(f"{P}saml/metadata/", signin.saml_metadata, name="saml-metadata"),
]
