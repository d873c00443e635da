"""The SSRF policy itself: address judgement and URL canonicalisation (domain.addresses)."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.addresses import check_url, is_public_address, parse_numeric_ipv4
from domain.errors import ValidationFailed

V4, V6 = ipaddress.IPv4Address, ipaddress.IPv6Address

NON_PUBLIC_V4_NETS = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
]


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.255.254",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "0.1.2.3",
        "255.255.255.255",
        # Python 3.11's ipaddress calls these global (or not private); the policy must not.
        "100.64.0.1",
        "100.127.255.254",
        "192.0.0.1",
        "192.0.0.9",
        "192.0.0.170",
        "198.18.0.1",
        "198.19.255.254",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "192.88.99.1",
        "192.0.2.10",
        "203.0.113.7",
        "::",
        "::1",
        "fe80::1",
        "fe80::1%eth0",
        "fec0::1",
        "fc00::1",
        "fd12:3456::1",
        "ff02::1",
        "ff0e::1",
        "2001:db8::1",
        "3fff::1",
        "100::1",
        "2001:10::1",
        "5f00::1",
        "4000::1",
        "::ffff:127.0.0.1",
        "::ffff:7f00:1",
        "::ffff:10.0.0.1",
        "::ffff:0:10.0.0.1",
        "::127.0.0.1",
        "::10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b::10.0.0.1",
        "64:ff9b::7f00:1",
        "64:ff9b:1::a00:1",
        "64:ff9b:1:ab::808:808",
        "2002:7f00:1::",
        "2002:a9fe:a9fe::1",
        "2002:c0a8:101::1",
        "not an address",
        "",
        "1.2.3",
        "::ffff:8.8.8.8%1",
    ],
)
def test_non_public_addresses(address: str) -> None:
    assert not is_public_address(address, allow_loopback=False)


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "192.0.1.1",
        "100.128.0.1",
        "2001:4860:4860::8888",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "::8.8.8.8",
    ],
)
def test_public_addresses(address: str) -> None:
    assert is_public_address(address, allow_loopback=False)
    assert is_public_address(ipaddress.ip_address(address), allow_loopback=True)


def _teredo(server: str, client: str) -> V6:
    return V6((0x20010000 << 96) | (int(V4(server)) << 64) | (int(V4(client)) ^ 0xFFFFFFFF))


def test_teredo_judges_both_embedded_addresses() -> None:
    private_server = _teredo("10.0.0.1", "8.8.8.8")
    private_client = _teredo("65.54.227.120", "192.168.1.1")
    both_public = _teredo("65.54.227.120", "8.8.8.8")
    assert private_server.teredo == (V4("10.0.0.1"), V4("8.8.8.8"))
    assert private_client.teredo == (V4("65.54.227.120"), V4("192.168.1.1"))
    assert not is_public_address(private_server, allow_loopback=False)
    assert not is_public_address(private_client, allow_loopback=False)
    assert is_public_address(both_public, allow_loopback=False)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "::127.0.0.1"])
def test_loopback_only_when_allowed(address: str) -> None:
    assert not is_public_address(address, allow_loopback=False)
    assert is_public_address(address, allow_loopback=True)


@pytest.mark.parametrize("address", ["10.0.0.1", "169.254.169.254", "::ffff:10.0.0.1", "fe80::1", "0.0.0.0", "::"])
def test_allow_loopback_allows_nothing_else(address: str) -> None:
    assert not is_public_address(address, allow_loopback=True)


# -- wrappings (hypothesis) ------------------------------------------------------------------


def _v4_in(nets: list[str]) -> st.SearchStrategy[V4]:
    def within(net: str) -> st.SearchStrategy[V4]:
        network = ipaddress.IPv4Network(net)
        return st.integers(int(network.network_address), int(network.broadcast_address)).map(V4)

    return st.sampled_from(nets).flatmap(within)


def _wrappings(a: V4, low80: int, other: V4) -> dict[str, V6]:
    n = int(a)
    return {
        "mapped": V6((0xFFFF << 32) | n),
        "translated": V6((0xFFFF << 48) | n),
        "nat64": V6(int(V6("64:ff9b::")) | n),
        "nat64-local": V6(int(V6("64:ff9b:1::")) | n),
        "6to4": V6((0x2002 << 112) | (n << 80) | low80),
        "compatible": V6(n),
        "teredo-server": _teredo(str(a), str(other)),
        "teredo-client": _teredo(str(other), str(a)),
    }


_ANY_V4 = st.integers(0, 2**32 - 1).map(V4)


@given(a=_v4_in(NON_PUBLIC_V4_NETS), low80=st.integers(0, 2**80 - 1), other=_ANY_V4)
def test_every_wrapping_of_a_private_ipv4_is_not_public(a: V4, low80: int, other: V4) -> None:
    assert not is_public_address(a, allow_loopback=False)
    for kind, wrapped in _wrappings(a, low80, other).items():
        assert not is_public_address(wrapped, allow_loopback=False), (kind, str(wrapped))
        assert not is_public_address(str(wrapped), allow_loopback=False), (kind, str(wrapped))
        if a not in ipaddress.IPv4Network("127.0.0.0/8") and not (kind == "compatible" and int(a) <= 1):
            assert not is_public_address(wrapped, allow_loopback=True), (kind, str(wrapped))


@given(a=_ANY_V4.filter(lambda ip: is_public_address(ip, allow_loopback=False)), low80=st.integers(0, 2**80 - 1))
def test_wrappings_of_a_public_ipv4_stay_public(a: V4, low80: int) -> None:
    for kind, wrapped in _wrappings(a, low80, a).items():
        assert is_public_address(wrapped, allow_loopback=False), (kind, str(wrapped))


# -- URLs ------------------------------------------------------------------------------------


def _numeric_forms() -> st.SearchStrategy[tuple[int, str]]:
    """(value, text) with text any inet_aton spelling of the IPv4 address value."""

    def spell(number: int, radix: str) -> str:
        return {"dec": str(number), "oct": "0" + format(number, "o"), "hex": "0x" + format(number, "x")}[radix]

    def build(value: int, count: int, radixes: list[str]) -> tuple[int, str]:
        octets = list(value.to_bytes(4, "big"))
        head, tail = octets[: count - 1], octets[count - 1 :]
        numbers = [*head, int.from_bytes(bytes(tail), "big")]
        return value, ".".join(spell(n, r) for n, r in zip(numbers, radixes, strict=False))

    return st.builds(
        build,
        st.integers(0, 2**32 - 1),
        st.integers(1, 4),
        st.lists(st.sampled_from(["dec", "oct", "hex"]), min_size=4, max_size=4),
    )


@given(_numeric_forms())
def test_numeric_hosts_mean_what_inet_aton_says(form: tuple[int, str]) -> None:
    value, text = form
    assert socket.inet_aton(text) == value.to_bytes(4, "big")
    assert parse_numeric_ipv4(text) == V4(value)
    target = check_url(f"http://{text}/")
    assert target.ip == V4(value)
    assert target.host == str(V4(value))


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://2130706433/", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1"),
        ("http://0x7f.1/", "127.0.0.1"),
        ("http://0x7f000001/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("http://127.0.0.1./", "127.0.0.1"),
        ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "127.0.0.1"),
        ("http://127\u30020\u30020\u30021/", "127.0.0.1"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
        ("HTTP://Example.COM/", "example.com"),
        ("https://b\u00fccher.de/", "xn--bcher-kva.de"),
        ("https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/", "example.com"),
    ],
)
def test_hosts_are_canonical(url: str, host: str) -> None:
    assert check_url(url).host == host


def test_canonical_url_keeps_path_and_query_and_drops_fragment() -> None:
    target = check_url("https://Example.com:443/a/b?c=d#frag")
    assert (target.scheme, target.host, target.port, target.target) == ("https", "example.com", 443, "/a/b?c=d")
    assert target.url == "https://example.com/a/b?c=d"
    assert check_url("http://example.com:8080").url == "http://example.com:8080/"
    assert check_url("http://[2001:db8::1]:8443/x").url == "http://[2001:db8::1]:8443/x"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "example.com",
        "//example.com/",
        "file:///etc/passwd",
        "gopher://example.com/",
        "ftp://example.com/",
        "javascript:alert(1)",
        "data:text/html,hi",
        "http:///path",
        "http://user@example.com/",
        "http://user:pw@example.com/",
        "http://example.com:22/",
        "http://example.com:0/",
        "http://example.com:99999/",
        "http://example.com:abc/",
        "http://exa mple.com/",
        "http://example.com/\n",
        "http://example.com\\@evil.com/",
        "http://1.2.3.4.5/",
        "http://256.1.1.1/",
        "http://08.0.0.1/",
        "http://[::1/",
        "http://[fe80::1%25eth0]/",
        "http://a..b/",
        "http://-a.com/",
        "http://%31%32%37.0.0.1/",
        "http://" + "a" * 2050 + ".com/",
    ],
)
def test_bad_urls_are_validation_errors(url: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        check_url(url)
    assert caught.value.details == {"validation_errors": {"url": caught.value.message.removeprefix("url: ")}}


def test_allowed_ports_can_be_widened() -> None:
    with pytest.raises(ValidationFailed):
        check_url("http://example.com:5000/")
    assert check_url("http://example.com:5000/", allowed_ports={5000}).port == 5000
