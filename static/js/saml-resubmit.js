// The SAML answer, posted again from this site's own page (identity/signin.py saml_acs): at once, without a click.
document.getElementById("saml-resubmit").submit();
