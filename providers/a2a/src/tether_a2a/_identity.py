"""A remote agent's pinned identity (``identity`` of ``[[plugin.a2a.agents]]``): who must answer
at its URL, checked before any message is sent.

* ``card_name``: the name its card gives.
* ``card_key_sha256``: a key that signs its card. A2A cards carry JWS signatures over the
  card's canonical JSON (RFC 8785) without ``signatures``; the key of a signature is taken from
  its protected header (``jwk``, or the key set at ``jku`` with its ``kid``), its RFC 7638
  thumbprint must be the pinned one, and the signature must verify with it (the a2a-sdk's
  verifier). A card that carries no signature by that key is refused.
* ``tls_sha256``: its TLS certificate. The HTTP client's TLS context checks the SHA-256 of the
  certificate each connection presents right after the handshake, before a request is written
  (:func:`pinned_tls_context`): a connection to anyone else fails, and so does the request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ._settings import A2aAgentSettings

if TYPE_CHECKING:
    import httpx
    from a2a.types import AgentCard

__all__ = (
    "IdentityMismatch",
    "PinnedCertificateMismatch",
    "check_identity",
    "jwk_thumbprint",
    "pinned_mismatch",
    "pinned_tls_context",
)

#: The members of a JWK its RFC 7638 thumbprint covers, by key type.
_THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
    "oct": ("k", "kty"),
}
#: The signature algorithms taken (asymmetric only: a card's key is public).
ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "EdDSA"]


class IdentityMismatch(Exception):
    """The agent at the URL is not the one pinned."""


class PinnedCertificateMismatch(ssl.SSLCertVerificationError):
    """A TLS connection presented a certificate other than the pinned one."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of ``jwk``, base64url without padding."""
    kty = str(jwk.get("kty", ""))
    members = _THUMBPRINT_MEMBERS.get(kty)
    if members is None:
        raise ValueError(f"a JWK of type {kty!r} has no thumbprint here")
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode()).digest())


def _same_thumbprint(found: str, pinned: str) -> bool:
    digits = pinned.replace(":", "").lower()
    if len(digits) == 64:
        padded = found + "=" * (-len(found) % 4)
        return base64.urlsafe_b64decode(padded).hex() == digits
    return found == pinned


def _fingerprint(pinned: str) -> str:
    return pinned.replace(":", "").lower()


def pinned_tls_context(spec: A2aAgentSettings) -> ssl.SSLContext | None:
    """A TLS context that also requires the pinned certificate, or ``None`` when none is
    pinned. Certificates are still verified as usual (CA, host name)."""
    identity = spec.identity
    if identity is None or identity.tls_sha256 is None:
        return None
    import httpx

    expected = _fingerprint(identity.tls_sha256)
    name = spec.name

    class Pinned(ssl.SSLObject):
        def do_handshake(self) -> None:
            super().do_handshake()
            der = self.getpeercert(binary_form=True) or b""
            found = hashlib.sha256(der).hexdigest()
            if found != expected:
                raise PinnedCertificateMismatch(
                    f"A2A agent {name!r} presented a TLS certificate with SHA-256 {found}, not "
                    f"the pinned {expected} (identity.tls_sha256)"
                )

    context = httpx.create_ssl_context()
    context.sslobject_class = Pinned
    return context


def pinned_mismatch(exc: BaseException) -> PinnedCertificateMismatch | None:
    """The certificate mismatch behind ``exc`` (an HTTP error wrapping it), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, PinnedCertificateMismatch):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


async def check_identity(spec: A2aAgentSettings, card: AgentCard, http: httpx.AsyncClient) -> None:
    """Raise :class:`IdentityMismatch` when ``card`` is not the pinned agent's (name, signing
    key). The TLS pin is checked by the connection itself."""
    identity = spec.identity
    if identity is None:
        return
    if identity.card_name is not None and card.name != identity.card_name:
        raise IdentityMismatch(
            f"its card is named {card.name[:200]!r}, not {identity.card_name!r} "
            "(identity.card_name)"
        )
    if identity.card_key_sha256 is not None:
        await _check_signature(card, identity.card_key_sha256, http)


async def _check_signature(card: AgentCard, pinned: str, http: httpx.AsyncClient) -> None:
    from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
    from jwt import PyJWK

    if not card.signatures:
        raise IdentityMismatch(
            "its card carries no signature, and identity.card_key_sha256 pins the key that signs it"
        )
    found: list[str] = []
    for signature in card.signatures:
        header = _protected(signature.protected)
        jwk = await _key_of(header, http)
        if jwk is None:
            continue
        try:
            thumbprint = jwk_thumbprint(jwk)
        except (KeyError, ValueError):
            continue
        found.append(thumbprint)
        if not _same_thumbprint(thumbprint, pinned):
            continue
        verify = create_signature_verifier(_given(PyJWK(dict(jwk))), ALGORITHMS)
        one = type(card)()
        one.CopyFrom(card)
        del one.signatures[:]
        one.signatures.append(signature)
        try:
            verify(one)
        except SignatureVerificationError as exc:
            raise IdentityMismatch(
                f"its card's signature by the pinned key {thumbprint} does not verify ({exc}): "
                "the card was changed after it was signed"
            ) from None
        return
    shown = ", ".join(found) or "none whose key could be read"
    raise IdentityMismatch(
        f"its card is not signed by the pinned key {pinned} (identity.card_key_sha256); the "
        f"keys of its signatures: {shown}"
    )


def _given(key: Any) -> Any:
    """A key provider for the a2a-sdk's verifier that gives ``key`` whatever is asked."""

    def provide(kid: str | None, jku: str | None) -> Any:
        return key

    return provide


def _protected(protected: str) -> dict[str, Any]:
    try:
        padded = protected + "=" * (-len(protected) % 4)
        header = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, TypeError):
        return {}
    return cast("dict[str, Any]", header) if isinstance(header, dict) else {}


async def _key_of(header: Mapping[str, Any], http: httpx.AsyncClient) -> Mapping[str, Any] | None:
    """The public JWK of a signature: its protected header's ``jwk``, or the key ``kid`` of the
    key set at ``jku``."""
    jwk = header.get("jwk")
    if isinstance(jwk, dict):
        return cast("dict[str, Any]", jwk)
    jku, kid = header.get("jku"), header.get("kid")
    if not isinstance(jku, str) or not jku.startswith(("https://", "http://")):
        return None
    try:
        response = await http.get(jku)
        response.raise_for_status()
        found: Any = response.json()
    except Exception:
        return None
    keys: Any = cast("dict[str, Any]", found).get("keys") if isinstance(found, dict) else None
    for key in cast("list[Any]", keys) if isinstance(keys, list) else []:
        if isinstance(key, dict):
            jwk_found = cast("dict[str, Any]", key)
            if kid is None or jwk_found.get("kid") == kid:
                return jwk_found
    return None
