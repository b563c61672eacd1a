import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")
django_application = get_wsgi_application()

from mcp_tools.http import WithMcp  # noqa: E402  (needs the apps loaded)

application = WithMcp(django_application)  # /mcp/ is the MCP server (streamable HTTP); the rest is Django
