from django.apps import AppConfig


class McpToolsConfig(AppConfig):
    name = "mcp_tools"
    verbose_name = "MCP server"
