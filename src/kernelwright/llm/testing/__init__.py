"""Test helpers: a scripted loopback server speaking the OpenAI and Anthropic protocols."""

from .scripted_server import Answer, Script, ScriptedServer

__all__ = ["Answer", "Script", "ScriptedServer"]
