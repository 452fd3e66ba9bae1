"""secret_values: the values a message, a pasted file or a tool result presents as secrets.

Pure: no database, no Django. Also measured here: the benign corpus's
false-positive rate of the full entry scan and of secret_values, and the
unlabelled-token detector built on detect-secrets (agentmemory/threats/entropy.py).
Figures only are printed (`pytest -s`), never an entry or a value.
"""
import json
import random
import string
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from agentmemory.threats import MIN_SECRET_VALUE, SECRET, scan_entry, secret_values
from agentmemory.threats.entropy import BASE64, is_random

DATA = Path(__file__).parent / "data" / "threats"
ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))["entries"]


BENIGN = _load("benign")  # group -> texts
MALICIOUS = _load("malicious")  # category -> family -> texts
HERMES = _load("hermes")


# --- each kind of value ------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    # Labelled in prose, in the languages the scan knows.
    ("my password is hunter2x!", ("hunter2x",)),
    ("Her email password is swordfish.", ("swordfish",)),
    ("The wifi password is Blue-Falcon-77 and the door code is 1975", ("Blue-Falcon-77", "1975")),
    ("PIN 4821", ("4821",)),
    ("The PIN for the card is 0937.", ("0937",)),
    ("the key is Zk29QpLm47", ("Zk29QpLm47",)),
    ("the API key is 9d8f7a6b5c4e3d2f1a0b9c8d", ("9d8f7a6b5c4e3d2f1a0b9c8d",)),
    ("token: a1b2c3d4e5f6", ("a1b2c3d4e5f6",)),
    ("use token Zk29QpLm47XnVb81 for staging", ("Zk29QpLm47XnVb81",)),
    ("Credentials: admin/hunter22", ("hunter22",)),
    ("hunter2-x7 is the staging admin password", ("hunter2-x7",)),
    ("Recovery codes: 4821-9932, 1184-2290, 7731-0042", ("4821-9932", "1184-2290", "7731-0042")),
    ("Mein Passwort ist Sommer2024!", ("Sommer2024",)),
    ("Пароль: Zima2024!", ("Zima2024",)),
    ("我的密码是 abc12345", ("abc12345",)),
    ("ｍｙ ｐａｓｓｗｏｒｄ ｉｓ Ｈｕｎｔｅｒ２！", ("Hunter2",)),  # fullwidth, read after NFKC
    ("My **password** is hunter2hunter2x", ("hunter2hunter2x",)),  # read as markdown renders it
    # Assignments.
    ('api_key = "abcd1234efgh5678"', ("abcd1234efgh5678",)),
    ("DB_PASSWORD=s3cr3t-Pass!", ("s3cr3t-Pass",)),
    ('config: {"client_secret": "9f8e7d6c5b4a3f2e1d0c"}', ("9f8e7d6c5b4a3f2e1d0c",)),
    # A connection string's password.
    ("postgres://app:S3cretPw@db:5432/x", ("S3cretPw",)),
    ("REDIS_URL=redis://:R3disPw@cache:6379/0", ("R3disPw",)),
    # Authorization headers.
    ("Authorization: Bearer abcdefghijklmnop123456", ("abcdefghijklmnop123456",)),
    ("curl -H 'Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l' https://api.example.com",
     ("YWxhZGRpbjpvcGVuc2VzYW1l",)),
    # Well-known shapes: the whole key (not the shortest match of its pattern).
    ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",)),
    ("AWS id AKIAZ3Q7EXAMPLE4NTQ2", ("AKIAZ3Q7EXAMPLE4NTQ2",)),
    ("ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78 is the CI token", ("ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78",)),
    # Cards (as written and as digits) and recovery phrases.
    ("Card 4111 1111 1111 1111 exp 12/27", ("4111 1111 1111 1111", "4111111111111111")),
    ("The seed phrase is: abandon ability able about above absent absorb abstract absurd abuse access accident",
     ("abandon ability able about above absent absorb abstract absurd abuse access accident",)),
    # Unlabelled: password-shaped, and random keys (detect-secrets' entropy).
    ("Remember P@ssw0rd99 for the NAS.", ("P@ssw0rd99",)),
    ("Staging deploys with Zx81kQp0Lm2vNc7RtY4wBa9s", ("Zx81kQp0Lm2vNc7RtY4wBa9s",)),
    ("The deploy role's other half is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",)),
    ("Backup sync signs with XkgPF/FTm2UsUTNo7111ZluTvdjGjso5m+cc2i2Z", ("XkgPF/FTm2UsUTNo7111ZluTvdjGjso5m+cc2i2Z",)),
    ("The relay only accepts FSWnHslFTLuT4JkaMy5FiW4nA5xZn3F7", ("FSWnHslFTLuT4JkaMy5FiW4nA5xZn3F7",)),  # 32
    ("use vdb9Z66Ys4faGOlprUPBxJrIeKA0FywWZz4pzkhG here", ("vdb9Z66Ys4faGOlprUPBxJrIeKA0FywWZz4pzkhG",)),  # 40
    ("7UW8qNcpOGDPGsCUf2ptnKkleUpxB8TIbNywFkIK8UqfgPDn", ("7UW8qNcpOGDPGsCUf2ptnKkleUpxB8TIbNywFkIK8UqfgPDn",)),  # 48
    ("QmFzZTY0U2VjcmV0VG9rZW4xMjM0NTY3ODk=", ("QmFzZTY0U2VjcmV0VG9rZW4xMjM0NTY3ODk",)),
])
def test_each_kind_of_value_is_returned(text, expected):
    assert secret_values(text) == expected


def test_values_come_in_order_without_repeats():
    text = ("Staging token: Zx81kQp0Lm2vNc7RtY4wBa9s; prod password is Hunter2!Secure99. "
            "Again the staging token: Zx81kQp0Lm2vNc7RtY4wBa9s")
    assert secret_values(text) == ("Zx81kQp0Lm2vNc7RtY4wBa9s", "Hunter2!Secure99")


def test_a_private_key_block_gives_its_header_and_each_base64_line():
    text = ("here is the deploy key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nQyNTUxOQAAACAx\n-----END OPENSSH PRIVATE KEY-----\nthanks")
    assert secret_values(text) == (
        "-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "QyNTUxOQAAACAx")


def test_values_shorter_than_four_characters_are_not_returned():
    assert MIN_SECRET_VALUE == 4
    assert secret_values("CVV 123") == ()
    assert secret_values("PIN 4821") == ("4821",)


# --- placeholders and references --------------------------------------------------


@pytest.mark.parametrize("text", [
    "api_key: <your-key>",
    "API_KEY=<your-api-key>",
    "password: changeme",
    "DATABASE_PASSWORD=${DATABASE_PASSWORD}",
    "password: ${{ secrets.DB_PASSWORD }}",
    "api_key = os.environ['OPENAI_API_KEY']",
    'API_KEY = os.getenv("API_KEY")',
    'ENV_PASSWORD = "MYPLUGIN_APP_PASSWORD"',
    "token = settings.GITHUB_TOKEN",
    'password = form.cleaned_data["password"]',
    "token = request.headers.get('Authorization')",
    'auth_token: "{{ lookup(\'env\', \'TOKEN\') }}"',
    "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256",
    "password: your_password_here",
    "token: string\npassword: string",
    "password: ********",
    "secret_key_base: <%= ENV['SECRET_KEY_BASE'] %>",
    'curl -H "Authorization: Bearer $API_TOKEN" https://api.example.com',
    'curl -H "Authorization: Bearer ***" https://api.cloudflare.com/client/v4/zones',
    "environment:\n  POSTGRES_PASSWORD: postgres\n  POSTGRES_USER: app",  # the image's default, named after it
])
def test_placeholders_references_and_variable_names_are_not_values(text):
    assert secret_values(text) == ()


# --- pasted configuration files ----------------------------------------------------


def test_a_pasted_env_file():
    text = ("# staging\nDEBUG=false\nDB_HOST=db.internal\nDB_PASSWORD=swordfish\nAPI_KEY=<your-key>\n"
            "SECRET=changeme\nEMPTY_TOKEN=\nNEXT_SETTING=value123abc\n"
            "export GITHUB_TOKEN=abc123def456ghi789\nREDIS_URL=redis://:R3disPw@cache:6379/0\n")
    assert secret_values(text) == ("swordfish", "abc123def456ghi789", "R3disPw")


def test_a_pasted_yaml_file():
    text = ("database:\n  host: db.internal\n  port: 5432\n  user: app\n  password: hunter2\n"
            "smtp:\n  password: \"correct horse battery staple\"\n"
            "github:\n  token: ${GITHUB_TOKEN}\n  api_key: sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz123456\n")
    assert secret_values(text) == (
        "hunter2", "correct horse battery staple", "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz123456")


def test_a_pasted_json_file():
    text = ('{\n  "name": "atlas",\n  "version": "4.12.3",\n  "api_key": "Zm9vYmFyYmF6cXV4MTIz",\n'
            '  "webhook": {"url": "https://hooks.example.com/x", "secret": "wh-7Hk2p9Qz"},\n'
            '  "commit": "9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f3a5b"\n}')
    assert secret_values(text) == ("Zm9vYmFyYmF6cXV4MTIz", "wh-7Hk2p9Qz")


def test_a_pasted_ini_file():
    text = "[client]\nhost = localhost\nuser = app\npassword = hunter2\n\n[server]\npassword =\nport = 3306\n"
    assert secret_values(text) == ("hunter2",)


# --- messages without a secret -----------------------------------------------------


@pytest.mark.parametrize("text", [
    "How do I fix TokenAuthentication2 in src/app/views.py?",
    "Why does useAuthToken2 re-render twice? It's in src/components/UserProfileCard/useAuthToken2.ts.",
    "The snake_case helper get_user_by_id and the camelCase getUserById do the same thing.",
    "Compare 3f9c2a1 with 9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f3a5b, please.",
    "Request id 8f14e45f-ceea-467a-9af9-0f5c3b6e2d71 failed with a 502.",
    "See https://github.com/encode/django-rest-framework/blob/master/rest_framework/authtoken/models.py",
    "The file is at /home/me/projects/atlas/config/keys/SigningKey2024/main.pem",
    "Local database: postgres://postgres@127.0.0.1:5432/app",
    "docker pull ghcr.io/example/atlas@sha256:6dac3ca5d83e89b3b1226ffab399bb71e1f553d7e3ff49170b806cb93292cf87",
    "CI deploy key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJVp3hjHwIQyEladzd8mFcf0YSXcmyKS3qMLB7VqTQKm ci@atlas",
    "The OpenSSL shim calls X509_NAME_get_index_by_NID and EVP_PKEY_get1_RSA.",
    "Our password policy requires 12 characters; the password is stored in Bitwarden.",
    "Token budget per request is about 8k; max_tokens=4096.",
    "Error: KeyError: 'SECRET_KEY' in settings.py line 42",
    "class PasswordResetTokenGenerator(BaseTokenGenerator): ...",
    "def login(username: str, password: str) -> bool:",
    "Use Ctrl+Shift+P, then type Python: Select Interpreter.",
    "AWS region eu-west-1, instance i-0abcd1234ef567890, bucket my-bucket-2024.",
    "pip install djangorestframework-simplejwt==5.3.1",
    "",
])
def test_a_message_without_a_secret_has_no_values(text):
    assert secret_values(text) == ()


# --- the corpora --------------------------------------------------------------------


def test_every_value_is_taken_from_the_text():
    texts = [text for families in (MALICIOUS["secret"], HERMES["secret"]) for texts in families.values()
             for text in texts]
    for text in texts:
        compatible = unicodedata.normalize("NFKC", text)
        for value in secret_values(text):
            assert value in compatible or value in compatible.replace("*", "").replace("`", "") or value.isdigit()


def test_benign_corpus_false_positives_of_the_scan_and_of_secret_values():
    # Figures only, never the entries: `pytest -s` prints them.
    texts = [text for texts in BENIGN.values() for text in texts]
    refused = sum(scan_entry(text) is not None for text in texts)
    with_values = sum(bool(secret_values(text)) for text in texts)
    print(f"\nbenign corpus: scan_entry refuses {refused}/{len(texts)}; "
          f"secret_values finds a value in {with_values}/{len(texts)}")
    assert refused == 0
    assert with_values <= 0.01 * len(texts)


def test_every_secret_of_the_corpora_gives_a_value_but_the_too_short():
    texts = [text for families in (MALICIOUS["secret"], HERMES["secret"]) for texts in families.values()
             for text in texts]
    missed = [index for index, text in enumerate(texts) if not secret_values(text)]
    print(f"\nsecret corpora: secret_values finds a value in {len(texts) - len(missed)}/{len(texts)}")
    # Only "CVV 123": its value has 3 characters.
    assert len(missed) <= 1


@pytest.mark.parametrize("text", MALICIOUS["secret"]["unlabelled"])
def test_unlabelled_corpus_secrets_are_refused_and_give_a_value(text):
    assert scan_entry(text).category == SECRET
    assert secret_values(text)


# --- the unlabelled detector (detect-secrets) ---------------------------------------


def test_random_keys_are_caught_by_length():
    rng = random.Random(36)
    alphabet = string.ascii_letters + string.digits
    caught = {}
    for length in (20, 32, 40, 48):
        tokens = ["".join(rng.choice(alphabet) for _ in range(length)) for _ in range(200)]
        caught[length] = sum(bool(secret_values(f"The service accepts {token} as its header.")) for token in tokens)
    print("\nrandom base62 caught of 200: " + ", ".join(f"{n} chars {c}" for n, c in caught.items()))
    assert caught[20] >= 0.9 * 200 and caught[32] >= 0.95 * 200
    assert caught[40] >= 0.95 * 200 and caught[48] >= 0.97 * 200
    # Base64 with + and / (an AWS secret access key's alphabet).
    keys = ["".join(rng.choice(alphabet + "+/") for _ in range(40)) for _ in range(200)]
    assert sum(bool(secret_values(key)) for key in keys) >= 0.95 * 200


@pytest.mark.parametrize("run", [
    "TokenAuthentication2", "AbstractSingletonProxyFactoryBean", "useAuthToken2RefreshHandler",
    "get_user_by_id_or_404", "X509_NAME_get_index_by_NID", "x86_64-unknown-linux-gnu",
    "config/keys/SigningKey2024/main", "feature/JIRA-123-short-description", "zq8Pangolin6620Saffron",
    "Bob-Marigold-8812", "SENTINEL-9d41-basalt", "GHSA-c2jg-hw38-jrqq", "ChaCha20Poly1305",
    "9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f3a5b", "8f14e45f-ceea-467a-9af9-0f5c3b6e2d71",
])
def test_identifiers_paths_and_hashes_are_not_random(run):
    assert not is_random(run)


def test_long_hex_is_a_key_unless_a_digest_label_names_it():
    digest = "6dac3ca5d83e89b3b1226ffab399bb71e1f553d7e3ff49170b806cb93292cf87"
    assert is_random(digest)
    assert not is_random(digest, "sha256:")
    assert not is_random(digest[:40])  # a SHA-1 commit id


def test_the_plugin_scores_unquoted_runs_and_keeps_its_own_limit():
    # The plugin's stock regex only finds quoted strings; ours is set once, unquoted.
    assert list(BASE64.analyze_string("a Zx81kQp0Lm2vNc7RtY4wBa9s b")) == ["a", "Zx81kQp0Lm2vNc7RtY4wBa9s", "b"]
    assert BASE64.entropy_limit == 4.5


def test_importing_detect_secrets_leaves_logging_and_warnings_as_they_were():
    # detect-secrets' core/log.py turns on logging.captureWarnings and adds an
    # unfiltered stderr handler at import; both are undone (entropy.py).
    code = (
        "import logging, warnings\n"
        "before = warnings.showwarning\n"
        "import agentmemory.threats\n"
        "import detect_secrets\n"
        "assert warnings.showwarning is before\n"
        "assert logging.getLogger('detect-secrets').handlers == []\n"
        "assert logging.getLogger('detect-secrets').level == logging.NOTSET\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
