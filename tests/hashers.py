"""A quick password hasher for the tests.

Django's PBKDF2 runs 1,000,000 iterations per password, about half a second
here: every test that made two people spent a second hashing their passwords.
This hasher writes ordinary `pbkdf2_sha256` hashes with 1,000 iterations.
The iteration count is stored in the hash, so the production hasher (the
live daphne servers of the browser and multi-process tests, the sign-in form)
verifies them as they are: only the cost of the tests' setup changes.
"""
from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
