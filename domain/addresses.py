"""Which outbound URLs and addresses Parley may reach (the SSRF policy).

Two rules, both pure:

* :func:`check_url` accepts only ``http``/``https`` URLs on a short list of ports, without
  credentials, and puts the host in canonical form. A host written as a number in any of the
  notations a C library accepts (``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1``, full-width
  digits, ...) becomes the IPv4 address it denotes, so it is judged by where it really points.
* :func:`is_public_address` says whether an address is on the public internet. Addresses that
  carry an IPv4 address inside an IPv6 one (mapped, translated, NAT64, 6to4, IPv4-compatible,
  Teredo) are unwrapped first, and the embedded address is what is judged.

Python 3.11's ``ipaddress`` flags are used only as a second opinion: the deny lists below are
explicit because 3.11 calls e.g. multicast, 192.0.0.9 and 3fff::/20 "global".
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from encodings import idna as _idna
from urllib.parse import urlsplit

from domain.errors import BlockedAddress, ValidationFailed

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2048
ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = frozenset({80, 443, 8080, 8443})
_SCHEME_PORT = {"http": 80, "https": 443}

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

LOOPBACK_V4 = _V4("127.0.0.0/8")
LOOPBACK_V6 = ipaddress.IPv6Address("::1")

# Never public, whatever the ipaddress module of the running Python thinks.
DENIED_V4: tuple[ipaddress.IPv4Network, ...] = (
    _V4("0.0.0.0/8"),  # "this network", includes 0.0.0.0
    _V4("10.0.0.0/8"),  # private
    _V4("100.64.0.0/10"),  # carrier-grade NAT (shared address space)
    _V4("127.0.0.0/8"),  # loopback (allowed separately when allow_loopback)
    _V4("169.254.0.0/16"),  # link-local, cloud metadata services
    _V4("172.16.0.0/12"),  # private
    _V4("192.0.0.0/24"),  # IETF protocol assignments
    _V4("192.0.2.0/24"),  # documentation TEST-NET-1
    _V4("192.88.99.0/24"),  # 6to4 relay anycast (deprecated)
    _V4("192.168.0.0/16"),  # private
    _V4("198.18.0.0/15"),  # benchmarking
    _V4("198.51.100.0/24"),  # documentation TEST-NET-2
    _V4("203.0.113.0/24"),  # documentation TEST-NET-3
    _V4("224.0.0.0/4"),  # multicast
    _V4("240.0.0.0/4"),  # reserved, includes the limited broadcast 255.255.255.255
)

GLOBAL_UNICAST_V6 = _V6("2000::/3")
DENIED_V6: tuple[ipaddress.IPv6Network, ...] = (
    _V6("::/8"),  # unspecified, loopback, IPv4-compatible (unwrapped before this list)
    _V6("100::/64"),  # discard-only
    _V6("2001::/23"),  # IETF protocol assignments (Teredo is unwrapped before this list)
    _V6("2001:db8::/32"),  # documentation
    _V6("2002::/16"),  # 6to4 (unwrapped before this list)
    _V6("3fff::/20"),  # documentation (RFC 9637)
    _V6("5f00::/16"),  # SRv6 SIDs
    _V6("fc00::/7"),  # unique local
    _V6("fe80::/10"),  # link-local
    _V6("fec0::/10"),  # site-local (deprecated)
    _V6("ff00::/8"),  # multicast
)

_MAPPED = _V6("::ffff:0:0/96")  # IPv4-mapped
_TRANSLATED = _V6("::ffff:0:0:0/96")  # IPv4-translated (SIIT)
_COMPATIBLE = _V6("::/96")  # IPv4-compatible (deprecated)
_NAT64 = _V6("64:ff9b::/96")  # NAT64 well-known prefix
_NAT64_LOCAL = _V6("64:ff9b:1::/48")  # NAT64 local-use prefix
_NAT64_LOCAL_AS_96 = _V6("64:ff9b:1::/96")  # the only layout of it we can unwrap unambiguously
_SIX_TO_FOUR = _V6("2002::/16")
_TEREDO = _V6("2001::/32")


def _low_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def _public_v4(ip: ipaddress.IPv4Address, allow_loopback: bool) -> bool:
    if ip in LOOPBACK_V4:
        return allow_loopback
    if any(ip in net for net in DENIED_V4):
        return False
    return not (
        ip.is_multicast
        or ip.is_unspecified
        or ip.is_link_local
        or ip.is_private
        or ip.is_reserved
        or ip.is_loopback
        or not ip.is_global
    )


def _embedded_v4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address] | None:
    """The IPv4 addresses an IPv6 address stands for, [] when it wraps one we cannot read
    (never public), or None when it is a plain IPv6 address."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip in _TRANSLATED or ip in _NAT64:
        return [_low_v4(ip)]
    if ip in _NAT64_LOCAL:
        return [_low_v4(ip)] if ip in _NAT64_LOCAL_AS_96 else []
    if ip in _SIX_TO_FOUR:
        assert ip.sixtofour is not None
        return [ip.sixtofour]
    if ip in _TEREDO:
        assert ip.teredo is not None
        server, client = ip.teredo
        return [server, client]
    if ip in _COMPATIBLE and int(ip) > 1:
        return [_low_v4(ip)]
    return None


def _public_v6(ip: ipaddress.IPv6Address, allow_loopback: bool) -> bool:
    if ip.scope_id:
        return False
    embedded = _embedded_v4(ip)
    if embedded is not None:
        return bool(embedded) and all(_public_v4(v4, allow_loopback) for v4 in embedded)
    if ip == LOOPBACK_V6:
        return allow_loopback
    if ip not in GLOBAL_UNICAST_V6 or any(ip in net for net in DENIED_V6):
        return False
    return not (
        ip.is_multicast
        or ip.is_unspecified
        or ip.is_link_local
        or ip.is_site_local
        or ip.is_private
        or ip.is_reserved
        or ip.is_loopback
        or not ip.is_global
    )


def is_public_address(ip: str | IPAddress, *, allow_loopback: bool) -> bool:
    """True when ``ip`` is a public unicast address Parley may connect to.

    Loopback (127.0.0.0/8, ::1, and wrappings of them) passes only when ``allow_loopback``.
    Anything that is not a valid address is not public.
    """
    if isinstance(ip, str):
        try:
            ip = ipaddress.ip_address(ip)
        except ValueError:
            return False
    if isinstance(ip, ipaddress.IPv4Address):
        return _public_v4(ip, allow_loopback)
    if isinstance(ip, ipaddress.IPv6Address):
        return _public_v6(ip, allow_loopback)
    return False


def is_loopback_address(ip: str | IPAddress) -> bool:
    """True for 127.0.0.0/8 and ::1, also when wrapped in another IPv6 form."""
    if isinstance(ip, str):
        try:
            ip = ipaddress.ip_address(ip)
        except ValueError:
            return False
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in LOOPBACK_V4
    if ip == LOOPBACK_V6:
        return True
    embedded = _embedded_v4(ip)
    return bool(embedded and all(v4 in LOOPBACK_V4 for v4 in embedded))


def is_loopback_name(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost")


BLOCKED_MESSAGE = "the URL points to an address that is not allowed (private, loopback or reserved network)"

LOOPBACK_SETTING = "PARLEY_ALLOW_LOOPBACK_TARGETS"
"""The setting that allows loopback targets (local development); named in the error that refuses one."""

LOOPBACK_MESSAGE = (f"the URL points to this machine (a loopback address or localhost), which this server refuses; "
                    f"for local development, start it with {LOOPBACK_SETTING}=true")


def ensure_public(ip: str | IPAddress, *, allow_loopback: bool) -> None:
    """Raise :class:`BlockedAddress` unless ``ip`` is public (see :func:`is_public_address`); a loopback
    address refused because loopback targets are off gets the message naming the setting that allows them."""
    if not is_public_address(ip, allow_loopback=allow_loopback):
        raise BlockedAddress(LOOPBACK_MESSAGE if not allow_loopback and is_loopback_address(ip)
                             else BLOCKED_MESSAGE)


@dataclass(frozen=True, slots=True)
class ParsedTarget:
    """A URL that passed :func:`check_url`, in canonical form.

    ``host`` is lower-case ASCII (IDNA), or the canonical text of ``ip`` when the URL names an
    address (IPv6 without brackets). ``target`` is the path and query (at least ``/``).
    """

    scheme: str
    host: str
    port: int
    target: str
    ip: IPAddress | None = None

    @property
    def default_port(self) -> bool:
        return _SCHEME_PORT[self.scheme] == self.port

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        return host if self.default_port else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"


def port_allowed(port: int, addresses: Collection[str | IPAddress], *, allow_loopback: bool,
                 allowed_ports: Collection[int] = DEFAULT_PORTS) -> bool:
    """Whether a connection to ``port`` on ``addresses`` (every answer for the host) is allowed:
    a listed port, or any port when loopback targets are allowed and every address is loopback."""
    if port in allowed_ports:
        return True
    return allow_loopback and bool(addresses) and all(is_loopback_address(a) for a in addresses)


def _bad(message: str) -> ValidationFailed:
    return ValidationFailed.field("url", message)


# The characters inet_aton reads as a number part: decimal, 0-prefixed octal, 0x-prefixed hex.
_NUMBER_PART = re.compile(r"0x[0-9a-f]*|[0-9]+")
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def _number(part: str) -> int | None:
    if part.startswith("0x"):
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8) if all(c in "01234567" for c in part) else None
    return int(part)


def parse_numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The address ``host`` denotes under inet_aton rules (``a``, ``a.b``, ``a.b.c``, ``a.b.c.d``,
    each part decimal, octal with a leading 0 or hex with 0x), or None when it is not one."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMBER_PART.fullmatch(p) for p in parts):
        return None
    numbers = [_number(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    *head, last = numbers
    assert last is not None
    if any(n > 255 for n in head if n is not None) or last >= 256 ** (5 - len(parts)):
        return None
    value = last
    for index, n in enumerate(head):
        assert n is not None
        value |= n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _canonical_host(raw: str) -> tuple[str, IPAddress | None]:
    if not raw.isascii():
        raw = unicodedata.normalize("NFKC", raw.translate(_DOTS)).translate(_DOTS)
    host = raw.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise _bad("a host is required")
    if not host.isascii():
        try:
            host = ".".join(_idna.ToASCII(label).decode("ascii") for label in host.split(".")).lower()
        except (UnicodeError, ValueError):
            raise _bad("the host name is not valid") from None
    labels = host.split(".")
    # A name whose last label is numeric is an IPv4 address or nothing (as in WHATWG URL).
    if _NUMBER_PART.fullmatch(labels[-1]):
        ip = parse_numeric_ipv4(host)
        if ip is None:
            raise _bad("the host is not a valid IPv4 address")
        return str(ip), ip
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise _bad("the host name is not valid")
    return host, None


def check_url(url: str, *, allowed_ports: Collection[int] = DEFAULT_PORTS,
              allow_loopback: bool = False) -> ParsedTarget:
    """Validate an outbound URL and return it in canonical form.

    Raises ``ValidationFailed`` (field ``url``) when it is not an absolute http(s) URL of at most
    2048 characters with a host, no user info and a port in ``allowed_ports`` (80, 443, 8080 and
    8443 unless told otherwise), and ``BlockedAddress`` (naming the setting) for a loopback target
    on another port while loopback targets are not allowed. The port rule, the same for every
    outbound URL: when loopback targets are allowed (``allow_loopback``, development), a loopback
    address or a ``localhost`` name may use any port (local servers on random ports); everything
    else keeps the list.
    Whether the host's address may be reached is a separate question: see
    :func:`is_public_address` (an address literal is in ``ParsedTarget.ip``), and
    :func:`port_allowed` for the addresses a name resolves to.
    """
    if not isinstance(url, str) or not url:
        raise _bad("a URL is required")
    if len(url) > MAX_URL_LENGTH:
        raise _bad(f"must be at most {MAX_URL_LENGTH} characters")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F or c == "\\" for c in url):
        raise _bad("must not contain spaces, control characters or backslashes")
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ALLOWED_SCHEMES:
            raise _bad("only http and https URLs are allowed")
        netloc = parts.netloc
        if "@" in netloc:
            raise _bad("must not contain a user name or password")
        if not netloc or parts.hostname is None:
            raise _bad("a host is required")
        port = parts.port
    except ValueError:
        raise _bad("is not a valid URL") from None
    if port is None:
        port = _SCHEME_PORT[scheme]
    hostname = parts.hostname
    ip: IPAddress | None
    if "[" in netloc:
        if "%" in hostname:
            raise _bad("IPv6 zone identifiers are not allowed")
        try:
            ip = ipaddress.IPv6Address(hostname)
        except ValueError:
            raise _bad("the host is not a valid IPv6 address") from None
        host = str(ip)
    else:
        host, ip = _canonical_host(hostname)
    loopback = is_loopback_address(ip) if ip is not None else is_loopback_name(host)
    if port not in allowed_ports and loopback and not allow_loopback:
        raise BlockedAddress(LOOPBACK_MESSAGE)  # refused for being loopback, whatever its port
    if port not in allowed_ports and not (allow_loopback and loopback):
        raise _bad("the port is not allowed (use 80, 443, 8080 or 8443)")
    target = parts.path or "/"
    if not target.startswith("/"):
        raise _bad("is not a valid URL")
    if parts.query:
        target = f"{target}?{parts.query}"
    return ParsedTarget(scheme=scheme, host=host, port=port, target=target, ip=ip)
