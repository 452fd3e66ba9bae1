"""Static files: hashed and compressed once `collectstatic` has run, plain before.

`collectstatic` (the documented release step) writes every file to
STATIC_ROOT under a content-hashed name with a `.gz` copy beside it, and a
manifest. While STATIC_ROOT holds that manifest and DEBUG is off, `{% static %}`
renders the hashed names and ServeStatic serves them cached for a year. Without
a manifest (`make run`, the tests, a server started before the release step)
the same templates render the plain names, which ServeStatic finds in the app
and project static directories: no 500 for a missing manifest entry.
"""
from servestatic.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    def stored_name(self, name):
        if not self.hashed_files:  # no manifest: plain names, served through the finders
            return name
        return super().stored_name(name)
