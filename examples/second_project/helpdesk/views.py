"""POST /ask/ {"question"}: one turn of the helpdesk agent for the signed-in person."""
from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse

from .agent import answer
from .demo_model import DemoModel, demo_client

MODEL = DemoModel()


async def ask(request: HttpRequest) -> JsonResponse:
    if request.method != "POST":
        return JsonResponse({"detail": "POST only"}, status=405)
    user = await request.auser()
    if not user.is_authenticated:
        return JsonResponse({"detail": "sign in first"}, status=401)
    question = str(json.loads(request.body or b"{}").get("question", ""))[:2000]
    client = demo_client(MODEL)
    try:
        reply, outcome = await answer(client, user_id=user.pk, question=question)  # identity from the session
    except Exception:
        return JsonResponse({"detail": "the model failed; nothing was saved"}, status=502)
    finally:
        await client.close()
    return JsonResponse({"reply": reply, "memory": outcome.as_dict()})
