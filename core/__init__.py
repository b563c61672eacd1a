"""Project-wide helpers at the bottom of the stack (errors, parsers, middleware, environment): they import no app,
and every app may use them. ragsite/ is the top: settings, URLs, WSGI."""
