from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView

from config import account, favicon, health

urlpatterns = [
    path("favicon.ico", favicon.favicon, name="favicon"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    # The language switch (the account page's form posts to i18n/setlang/ with
    # `next`); LocaleMiddleware otherwise follows the browser. No language
    # prefix in any URL.
    path("i18n/", include("django.conf.urls.i18n")),
    # The chat page's strings for chat.js and markdown.js (locale/<lang>/djangojs.po),
    # a script of our own origin (script-src 'self'), loaded before them.
    path("jsi18n/chat/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", account.account_page, name="account"),
    path("accounts/token/revoke/", account.revoke_token, name="account-revoke-token"),
    path("accounts/sign-out-everywhere/", account.sign_out_everywhere, name="account-sign-out-everywhere"),
    path("api/account/token/", account.TokenView.as_view(), name="api-account-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("", include("agentmemory.urls")),
    path("", include("chat.urls")),
]

# A page whose database does not answer is a 503 saying so (config/unavailable.py); any other error, Django's 500.
handler500 = "config.unavailable.server_error"
