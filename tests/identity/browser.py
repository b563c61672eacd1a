"""What the identity tests do in Chromium more than once: sign in to ragsite with a password."""

from __future__ import annotations

PASSWORD = "pw-for-tests-123"  # tests.factories.make_user's


def sign_in_with_password(page, url: str, username: str, password: str = PASSWORD, *, lands: bool = True) -> None:  # type: ignore[no-untyped-def]
    """The login form, filled and sent; `lands`: wait for the home page (a refused sign-in stays on the form)."""
    page.goto(f"{url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    if lands:
        page.wait_for_url(f"{url}/")
