app_name = "agentmemory"
urlpatterns = []
