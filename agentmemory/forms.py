"""The memory page's forms: the shape of a post, not the memory rules.

Forms only check that a post has the fields the page sends; whether an entry
may be stored is decided by `rules` inside the store's commit, so a person's
edit and the agent's obey one set of rules. No form has a field that names a
person: the owner is always `request.user`. Text fields keep their
whitespace (`strip=False`) so the rules normalise it the same way for
everyone.
"""
from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .models import MemoryType

# Far above any document limit; only stops an absurd post before the rules run.
MAX_FIELD_CHARS = 20_000

TARGET_ERRORS = {
    "required": gettext_lazy("Choose which document to change."),
    "invalid_choice": gettext_lazy("Choose 'user' or 'memory' as the document."),
}


class AddEntryForm(forms.Form):
    target = forms.ChoiceField(choices=MemoryType.choices, error_messages=TARGET_ERRORS)
    content = forms.CharField(
        strip=False,
        max_length=MAX_FIELD_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": gettext_lazy("Write the fact itself before saving.")},
    )


class RemoveEntryForm(forms.Form):
    target = forms.ChoiceField(choices=MemoryType.choices, error_messages=TARGET_ERRORS)
    entry = forms.CharField(
        strip=False,
        max_length=MAX_FIELD_CHARS,
        widget=forms.HiddenInput,
        error_messages={"required": gettext_lazy("The page did not say which entry; reload it and try again.")},
    )


class CorrectEntryForm(RemoveEntryForm):
    content = forms.CharField(
        strip=False,
        max_length=MAX_FIELD_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": gettext_lazy("Write the corrected entry, or remove the entry instead.")},
    )


class ExpiryForm(RemoveEntryForm):
    """An entry's expiry: a date, or a preset ("week": for a week; "never": until the person removes it).

    `shown` is the date the page showed in the date field (its current
    expiry, or empty). A date other than that one was typed by the person, so
    it wins over "until I remove it", which an entry with no expiry shows
    selected; beside "for a week" it is refused, never silently dropped.
    """

    date = forms.DateField(required=False, input_formats=["%Y-%m-%d"],
                           error_messages={"invalid": gettext_lazy("Choose a date, or keep the entry until you "
                                                                   "remove it.")})
    preset = forms.ChoiceField(choices=[("", ""), ("week", "week"), ("never", "never")], required=False)
    shown = forms.DateField(required=False, input_formats=["%Y-%m-%d"])
    tz = forms.CharField(required=False, max_length=64)

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        if not data.get("preset") and not data.get("date"):
            raise forms.ValidationError(gettext_lazy("Choose a date, or keep the entry until you remove it."))
        if data.get("preset") == "week" and self._typed_date():
            raise forms.ValidationError(gettext_lazy("Choose either “for a week” or a date, not both."))
        return data

    def _typed_date(self) -> bool:
        typed = self.cleaned_data.get("date")
        return typed is not None and typed != self.cleaned_data.get("shown")

    @property
    def expires(self) -> str:
        preset = self.cleaned_data.get("preset")
        if preset == "never" and not self._typed_date():
            return "never"
        if preset == "week":
            return "for a week"
        return self.cleaned_data["date"].isoformat()


def first_error(form: forms.Form) -> str:
    """Return one plain sentence describing what is wrong with a post."""
    for errors in form.errors.values():
        if errors:
            return str(errors[0])  # in the active language
    return _("The form could not be read; reload the page and try again.")


class ImportForm(forms.Form):
    """What another assistant kept, pasted or uploaded; `passport.read` decides whether it can be read."""

    text = forms.CharField(strip=False, required=False, widget=forms.Textarea(attrs={"rows": 8}))
    file = forms.FileField(required=False, allow_empty_file=True)

    def clean(self):
        data = super().clean()
        if not (data.get("text") or "").strip() and not data.get("file") and not self.errors:
            raise forms.ValidationError(gettext_lazy("Paste what another assistant kept, or choose a file."))
        return data

    def data_bytes(self, limit: int) -> bytes:
        """The upload (at most `limit` + 1 bytes are read: more is too large anyway), else the pasted text."""
        upload = self.cleaned_data.get("file")
        if upload:
            return upload.read(limit + 1)
        return self.cleaned_data["text"].encode("utf-8")
