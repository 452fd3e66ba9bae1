"""The person's account page (`/accounts/`): their API token and "Sign out everywhere".

Thin views. What ends a credential lives in chat/signals.py: a password
change and a deactivation revoke the person's API tokens and close their
chat sockets, and Django's session hash (made from the password hash) ends
every session of theirs.

- The page says whether the person has an API token (DRF's authtoken: one
  per person), when it was made and its last four characters, never the
  whole key, with a button that revokes it.
- "Sign out everywhere" asks for the password (checked by `authenticate`, so
  wrong guesses count toward the sign-in lock-out of
  config/login_protection.py), then stores the same password again under a
  new salt. The hash changes, so every session in every browser stops
  matching it; the save revokes the tokens and closes the sockets; this
  browser is signed out too.
- `GET /api/account/token/` and `DELETE /api/account/token/` are the same
  for API clients (a client can revoke the token it is using).
"""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import authenticate, logout
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.signals import revoke_tokens

TEMPLATE = "registration/account.html"
SIGNED_OUT = _("You are signed out everywhere: in every browser, and every app that used your API token. "
               "Sign in again with your password.")
WRONG_PASSWORD = _("That is not your password, so nothing was changed.")


class ConfirmPasswordForm(forms.Form):
    password = forms.CharField(
        label=_("Your password"), strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )

    def __init__(self, request, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.request = request

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        person = self.request.user
        checked = authenticate(self.request, username=person.get_username(), password=password)
        if checked is None or checked.pk != person.pk:
            raise forms.ValidationError(WRONG_PASSWORD)
        return password


def describe_token(user) -> dict | None:
    """The person's API token without its key: when it was made and how it ends."""
    token = Token.objects.filter(user=user).first()
    if token is None:
        return None
    return {"created": token.created, "ends_with": token.key[-4:]}


@login_required
def account_page(request, form: ConfirmPasswordForm | None = None):
    return render(request, TEMPLATE, {
        "token": describe_token(request.user),
        "form": form or ConfirmPasswordForm(request),
    })


@login_required
@require_POST
def revoke_token(request):
    if revoke_tokens(request.user.pk):
        messages.success(request, gettext("Your API token was revoked: apps and scripts that used it are signed out."))
    else:
        messages.info(request, gettext("You have no API token, so there was nothing to revoke."))
    return redirect("account")


@login_required
@require_POST
def sign_out_everywhere(request):
    form = ConfirmPasswordForm(request, request.POST)
    if not form.is_valid():
        return account_page(request, form=form)
    person = request.user
    person.set_password(form.cleaned_data["password"])  # the same password, a new salt: a new hash
    person.save(update_fields=["password"])  # chat.signals: tokens revoked, sockets closed
    logout(request)
    messages.success(request, gettext(SIGNED_OUT))
    return redirect("login")


class TokenSerializer(serializers.Serializer):
    created = serializers.DateTimeField()
    ends_with = serializers.CharField(help_text="The key's last four characters; the key itself is never shown.")


class TokenStateSerializer(serializers.Serializer):
    token = TokenSerializer(allow_null=True)


class RevokedSerializer(serializers.Serializer):
    revoked = serializers.IntegerField(help_text="How many tokens were revoked (0 or 1).")


NOT_SIGNED_IN = OpenApiResponse(
    description="Not signed in: send Authorization: Token <key>, or the session cookie with the CSRF token.")


class TokenView(APIView):
    @extend_schema(operation_id="account_token_retrieve", summary="Your API token, without its key",
                   responses={200: TokenStateSerializer, 403: NOT_SIGNED_IN}, tags=["account"])
    def get(self, request):
        return Response(TokenStateSerializer({"token": describe_token(request.user)}).data)

    @extend_schema(operation_id="account_token_destroy", summary="Revoke your API token",
                   description="Deletes your API token (the one this request may be using): every client "
                               "that sends it is refused from now on. A password change, a deactivation and "
                               "signing out everywhere revoke it too.",
                   responses={200: RevokedSerializer, 403: NOT_SIGNED_IN}, tags=["account"])
    def delete(self, request):
        return Response({"revoked": revoke_tokens(request.user.pk)})
