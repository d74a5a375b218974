"""Users' SSH public keys (their profile's), and the one check of a key's format.

A key is stored as one normalised OpenSSH line (``<algorithm> <base64> [comment]``) with
its SHA256 fingerprint, unique per user. Clusters asked for with ``ssh: true`` carry the
keys of their owner and of their tenant's admins (docs/tunnels.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import models

# OpenSSH's own key types; DSA and RSA below 2048 bits are refused as too weak.
ALLOWED_ALGORITHMS = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
MIN_RSA_BITS = 2048
MAX_KEY_CHARS = 16384


@dataclass(frozen=True)
class ParsedKey:
    """A checked public key: its normalised line, fingerprint and comment."""

    line: str
    fingerprint: str
    comment: str


def parse_public_key(text: str) -> ParsedKey:
    """Check one OpenSSH public key line; ``ValueError`` says what is wrong with it."""
    import asyncssh

    text = (text or "").strip()
    if not text:
        raise ValueError("Paste one public key, e.g. the contents of ~/.ssh/id_ed25519.pub.")
    if len(text) > MAX_KEY_CHARS or "\n" in text:
        raise ValueError("Send exactly one public key, on one line.")
    if "PRIVATE KEY" in text:
        raise ValueError("This is a private key: send the public one (the .pub file).")
    parts = text.split(None, 2)
    if parts[0] not in ALLOWED_ALGORITHMS:
        raise ValueError(
            f"Not an OpenSSH public key of a supported type ({', '.join(ALLOWED_ALGORITHMS)}): "
            f"it starts with {parts[0][:40]!r}."
        )
    try:
        key = asyncssh.import_public_key(" ".join(parts[:2]))
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise ValueError(f"The key could not be read: {exc}.") from None
    if key.algorithm.decode() != parts[0]:
        raise ValueError("The key's type does not match the algorithm it is labelled with.")
    bits = getattr(getattr(key, "pyca_key", None), "key_size", MIN_RSA_BITS)
    if parts[0] == "ssh-rsa" and bits < MIN_RSA_BITS:
        raise ValueError(f"RSA keys need at least {MIN_RSA_BITS} bits.")
    comment = parts[2].strip() if len(parts) > 2 else ""
    line = " ".join([parts[0], parts[1], *([comment] if comment else [])])
    return ParsedKey(line=line, fingerprint=key.get_fingerprint("sha256"), comment=comment)


class SshKey(models.Model):
    """One SSH public key of a user (see the module)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys"
    )
    name = models.CharField(max_length=100, blank=True)
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "tenants"
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "fingerprint"], name="sshkey_user_fingerprint")
        ]

    def __str__(self) -> str:
        return f"{self.name or 'key'} {self.fingerprint}"
