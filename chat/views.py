"""The web chat page; everything live goes over the socket and the API."""
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from agentmemory import preferences
from agentmemory.conf import memory_settings
from agentmemory.notify import usage_payload
from agentmemory.store import MemoryUnavailable, load_snapshot

from .llm import demo_model_in_use
from .models import Conversation


@login_required
def index(request):
    conversations = Conversation.objects.filter(user=request.user)[:100]
    config = memory_settings()
    use_memory, usage = _memory_header(request.user.pk, config)
    return render(request, "chat/index.html", {
        "conversations": conversations,
        "demo_model": demo_model_in_use(),
        "memory_enabled": config.enabled,
        "use_memory": use_memory,
        "memory_usage": usage,
        # The memory-full notice offers "Tidy up" (agentmemory.tidy) where the deployment has it.
        "tidy_offered": bool(config.tidy_model),
        "max_message_chars": settings.CHAT_MAX_MESSAGE_CHARS,
    })


def _memory_header(user_id, config) -> tuple[bool, dict | None]:
    """Return the person's switch and their memory usage (None when it cannot be read), failing open."""
    try:
        use_memory = preferences.use_memory(user_id=user_id, timeout=config.read_timeout)
        snapshot = load_snapshot(user_id=user_id, timeout=config.read_timeout)
    except MemoryUnavailable:
        return True, None
    return use_memory, usage_payload(snapshot, config.limits)
