"""Login throttling (django-axes) on the site login and the Django admin login."""

from __future__ import annotations

from tests.factories import make_user


def _attempt(client, url: str, username: str, password: str) -> int:  # type: ignore[no-untyped-def]
    return client.post(url, {"username": username, "password": password}).status_code


def test_wrong_passwords_lock_the_username_out_for_a_while_on_both_logins(db, client, settings):
    for name in ("alice", "admin", "bob"):
        make_user(username=name, password="right-password-123", is_staff=name == "admin")
    for url, name in (("/accounts/login/", "alice"), ("/admin/login/", "admin")):
        for _ in range(settings.AXES_FAILURE_LIMIT - 1):
            assert _attempt(client, url, name, "wrong") == 200  # the form again, with an error
        assert _attempt(client, url, name, "wrong") == 429
        assert _attempt(client, url, name, "right-password-123") == 429  # locked, even with the password
    assert _attempt(client, "/accounts/login/", "bob", "right-password-123") == 302  # others are not affected


def test_a_successful_login_resets_the_count(db, client, settings):
    make_user(username="carol", password="right-password-123")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _attempt(client, "/accounts/login/", "carol", "wrong")
    assert _attempt(client, "/accounts/login/", "carol", "right-password-123") == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _attempt(client, "/accounts/login/", "carol", "wrong") == 200
