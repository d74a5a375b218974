"""Your SSH keys (the account menu): list, add, remove; clusters asked for with SSH
accept them (docs/tunnels.md)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from frontend.admin_forms import attach_errors
from frontend.views.common import form_page
from tenants import selectors, services


class SshKeyForm(forms.Form):
    """One public key, as in ~/.ssh/id_ed25519.pub."""

    public_key = forms.CharField(
        label="Public key",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "ssh-ed25519 AAAA... you@laptop"}),
        help_text="The contents of your .pub file (ed25519, ECDSA or RSA of 2048 bits or more).",
    )
    name = forms.CharField(required=False, max_length=100, help_text="Default: the key's comment.")


@login_required
def ssh_keys(request: HttpRequest) -> HttpResponse:
    """List your keys and add one."""
    form = SshKeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            key = services.ssh_key_add(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            attach_errors(form, exc)
        else:
            messages.success(request, f"Added {key.name or 'your key'} ({key.fingerprint}).")
            return redirect("ssh-keys")
    keys = selectors.ssh_key_list(user=request.user)
    return form_page(request, "frontend/ssh_keys.html", {"form": form, "keys": keys})


@login_required
@require_POST
def ssh_key_remove(request: HttpRequest, key_id: int) -> HttpResponse:
    """Remove one of your keys."""
    services.ssh_key_remove(user=request.user, key_id=key_id)
    messages.success(request, "The key is removed; clusters provisioned from now on refuse it.")
    return redirect("ssh-keys")
