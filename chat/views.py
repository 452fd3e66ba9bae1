"""The web chat page; everything live goes over the socket and the API."""
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from agentmemory.conf import memory_settings

from .llm import demo_model_in_use
from .models import Conversation


@login_required
def index(request):
    conversations = Conversation.objects.filter(user=request.user)[:100]
    return render(request, "chat/index.html", {
        "conversations": conversations,
        "demo_model": demo_model_in_use(),
        "memory_enabled": memory_settings().enabled,
        "max_message_chars": settings.CHAT_MAX_MESSAGE_CHARS,
    })
