"""`/favicon.ico`: browsers ask for it on every page, whatever the page links."""
from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe


@require_safe
@cache_control(public=True, max_age=86400)
def favicon(request):
    path = finders.find("favicon.ico")
    if path is None:
        raise Http404("no favicon")
    return FileResponse(open(path, "rb"), content_type="image/x-icon")
