app_name = "chat"
urlpatterns = []
