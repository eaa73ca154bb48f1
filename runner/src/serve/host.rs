//! The host a request names, held to one rule ([`check`]), and the origin a state-changing
//! request comes from, which must be the one that host names ([`check_origin`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use axum::http::{HeaderMap, Uri, header};

use super::error::ApiError;

/// The port a `Host` header or an `http://` origin means when it names none.
const HTTP_PORT: u16 = 80;

/// A host and port as a request names them: an address, or a name lower-cased and without a
/// trailing dot, so that the same place is always the same value.
#[derive(Debug, PartialEq, Eq)]
pub struct Authority {
    /// Where.
    host: Host,
    /// The port, [`HTTP_PORT`] when none is written.
    port: u16,
}

/// The host part of an [`Authority`].
#[derive(Debug, PartialEq, Eq)]
enum Host {
    /// An IPv4 address, or an IPv6 one written in brackets.
    Address(IpAddr),
    /// A name: letters, digits, `-`, `_` and `.`.
    Name(String),
}

/// Why a request's host is refused.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No `Host` header, or more than one.
    #[error("a request must carry exactly one Host header, this one has {0}")]
    Count(usize),
    /// A request target that is not a path: absolute-form (`http://host/path`) or `*`.
    #[error("the request target must be a path such as `/api/runs`, not `{0}`")]
    Target(String),
    /// A `Host` that is not `name[:port]`: userinfo (`@`), a path, stray characters.
    #[error("`Host: {0}` is not a host name with an optional port")]
    Malformed(String),
    /// A `Host` naming another port than the one the server listens on.
    #[error("`Host: {host}` does not name port {port}, the one this server listens on")]
    Port {
        /// The header.
        host: String,
        /// The bound port.
        port: u16,
    },
    /// A `Host` naming another machine, on a server without a token.
    #[error("`Host: {0}` does not name this machine: without a token, only `localhost` and loopback addresses")]
    Foreign(String),
}

/// The host a request names, when it may be served: exactly one `Host` header, a request
/// target that is a path (origin-form), `name[:port]` without userinfo, the name compared
/// case-insensitively and without a trailing dot, the port the server is bound to (`port`),
/// and, when `loopback_only`, `localhost` or a loopback address.
pub fn check(uri: &Uri, headers: &HeaderMap, port: u16, loopback_only: bool) -> Result<Authority, HostError> {
    if uri.scheme().is_some() || uri.authority().is_some() || !uri.path().starts_with('/') {
        return Err(HostError::Target(uri.to_string()));
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(value), None) = (hosts.next(), hosts.next()) else {
        return Err(HostError::Count(headers.get_all(header::HOST).iter().count()));
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    let authority = Authority::parse(&text).ok_or_else(|| HostError::Malformed(text.to_string()))?;
    if authority.port != port {
        return Err(HostError::Port { host: text.to_string(), port });
    }
    if loopback_only && !authority.is_loopback() {
        return Err(HostError::Foreign(text.to_string()));
    }
    Ok(authority)
}

/// Lets a state-changing request through when it carries no `Origin` (a client that is not
/// a browser: browsers send one with every such request) or exactly the `http://` origin of
/// the host it names.
pub fn check_origin(headers: &HeaderMap, host: &Authority) -> Result<(), ApiError> {
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let Some(value) = origins.next() else { return Ok(()) };
    let text = String::from_utf8_lossy(value.as_bytes());
    let own = text.strip_prefix("http://").and_then(Authority::parse).is_some_and(|origin| origin == *host);
    if own && origins.next().is_none() { Ok(()) } else { Err(ApiError::Origin(text.into_owned())) }
}

impl Authority {
    /// Reads `name[:port]`, `address[:port]` or `[v6-address][:port]`; `None` for anything
    /// else, userinfo and paths included.
    fn parse(text: &str) -> Option<Authority> {
        let (host, rest) = match text.strip_prefix('[') {
            Some(bracketed) => {
                let (address, rest) = bracketed.split_once(']')?;
                (Host::Address(IpAddr::V6(address.parse::<Ipv6Addr>().ok()?)), rest)
            }
            None => {
                let (name, rest) = text.split_at(text.find(':').unwrap_or(text.len()));
                (Host::named(name)?, rest)
            }
        };
        let port = match rest {
            "" => HTTP_PORT,
            _ => {
                let digits = rest.strip_prefix(':')?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                digits.parse().ok()?
            }
        };
        Some(Authority { host, port })
    }

    /// Whether this names the machine itself: `localhost` or a loopback address.
    fn is_loopback(&self) -> bool {
        match &self.host {
            Host::Address(address) => address.is_loopback(),
            Host::Name(name) => name == "localhost",
        }
    }
}

impl Host {
    /// An IPv4 address or a name, without its trailing dot and in lower case.
    fn named(text: &str) -> Option<Host> {
        let name = text.strip_suffix('.').unwrap_or(text);
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
        if name.is_empty() || !name.bytes().all(allowed) {
            return None;
        }
        Some(match name.parse::<Ipv4Addr>() {
            Ok(address) => Host::Address(IpAddr::V4(address)),
            Err(_) => Host::Name(name.to_ascii_lowercase()),
        })
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name, HeaderValue::from_str(value).expect("a test header value is visible ASCII"));
        }
        headers
    }

    fn host(value: &str, loopback_only: bool) -> Result<Authority, HostError> {
        check(&Uri::from_static("/api/runs"), &headers(&[(header::HOST, value)]), 8080, loopback_only)
    }

    #[test]
    fn loopback_names_on_the_bound_port_are_served_whatever_their_case_or_trailing_dot() {
        for value in
            ["127.0.0.1:8080", "localhost:8080", "LocalHost:8080", "localhost.:8080", "[::1]:8080", "127.0.0.2:8080"]
        {
            assert!(host(value, true).is_ok(), "{value}");
        }
    }

    #[test]
    fn userinfo_other_ports_other_machines_and_stray_characters_are_refused() {
        for value in [
            "127.0.0.1:8080@evil.example",
            "evil.example@127.0.0.1:8080",
            "localhost:8080/x",
            "localhost:+80",
            "::1:8080",
            "[::1]8080",
            ".:8080",
            "",
        ] {
            assert!(matches!(host(value, false), Err(HostError::Malformed(_))), "{value}");
        }
        for value in ["127.0.0.1:1", "127.0.0.1", "localhost:08080x"] {
            assert!(host(value, false).is_err(), "{value}");
        }
        assert!(matches!(host("localhost", true), Err(HostError::Port { port: 8080, .. })));
        for value in ["evil.example:8080", "192.168.1.2:8080", "localhost.evil.example:8080"] {
            assert!(matches!(host(value, true), Err(HostError::Foreign(_))), "{value}");
            assert!(host(value, false).is_ok(), "with a token any name of this machine may be used: {value}");
        }
    }

    #[test]
    fn one_host_header_and_a_path_target_only() {
        let two = headers(&[(header::HOST, "127.0.0.1:8080"), (header::HOST, "evil.example")]);
        assert!(matches!(check(&Uri::from_static("/"), &two, 8080, true), Err(HostError::Count(2))));
        assert!(matches!(check(&Uri::from_static("/"), &HeaderMap::new(), 8080, true), Err(HostError::Count(0))));
        let one = headers(&[(header::HOST, "127.0.0.1:8080")]);
        for target in ["http://evil.example/api/runs", "*", "127.0.0.1:8080"] {
            let uri: Uri = target.parse().expect("a request target");
            assert!(matches!(check(&uri, &one, 8080, true), Err(HostError::Target(_))), "{target}");
        }
    }

    #[test]
    fn an_origin_is_the_hosts_own_or_absent() {
        let own = host("localhost.:8080", true).expect("a local host");
        assert!(check_origin(&HeaderMap::new(), &own).is_ok());
        assert!(check_origin(&headers(&[(header::ORIGIN, "http://LOCALHOST:8080")]), &own).is_ok());
        for origin in
            ["http://evil.example", "null", "https://localhost:8080", "http://127.0.0.1:8080", "http://localhost:8080/"]
        {
            assert!(check_origin(&headers(&[(header::ORIGIN, origin)]), &own).is_err(), "{origin}");
        }
        let twice = headers(&[(header::ORIGIN, "http://localhost:8080"), (header::ORIGIN, "http://evil.example")]);
        assert!(check_origin(&twice, &own).is_err());
    }
}
