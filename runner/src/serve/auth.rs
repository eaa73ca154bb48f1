//! Who may talk to the server: with a token set, every request carries it (a bearer header,
//! or the cookie a first visit with `?token=` sets, so the page's event streams carry it too);
//! without one, only requests naming this machine as their host (the server is on loopback,
//! and a page of another site must not reach it by renaming its own host). Every response
//! also forbids the page to load anything from elsewhere or run inline script.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Served;
use super::error::ApiError;

/// The cookie that carries the token.
const COOKIE: &str = "runner_token";

/// The content security policy of every response: our own scripts, styles and images only.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                      connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Lets a request through when it may be served.
pub async fn guard(State(served): State<Arc<Served>>, request: Request, next: Next) -> Response {
    let mut set_cookie = None;
    match &served.token {
        Some(token) => {
            let headers = request.headers();
            let carried = bearer(headers).or_else(|| cookie(headers));
            if !carried.is_some_and(|carried| same(carried, token)) {
                let query: Option<Query<HashMap<String, String>>> = Query::try_from_uri(request.uri()).ok();
                match query.as_ref().and_then(|q| q.get("token")) {
                    Some(given) if same(given, token) => set_cookie = Some(token.clone()),
                    _ => return ApiError::Unauthorized.into_response(),
                }
            }
        }
        None => {
            if !local_host(request.headers()) {
                return ApiError::ForeignHost.into_response();
            }
        }
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if let Some(token) = set_cookie
        && let Ok(value) = HeaderValue::from_str(&format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"))
    {
        headers.insert(header::SET_COOKIE, value);
    }
    response
}

/// The token of an `Authorization: Bearer` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")
}

/// The token of our cookie.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Whether the Host header names this machine by a loopback name.
fn local_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Compares two tokens in time that does not depend on where they differ.
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).expect("a test header value is visible ASCII"));
        headers
    }

    #[test]
    fn only_loopback_names_are_local_hosts() {
        for host in ["127.0.0.1:8080", "localhost:1", "[::1]:80", "127.0.0.2"] {
            assert!(local_host(&with(header::HOST, host)), "{host}");
        }
        for host in ["evil.example:8080", "192.168.1.2:8080", "localhost.evil.example"] {
            assert!(!local_host(&with(header::HOST, host)), "{host}");
        }
        assert!(!local_host(&HeaderMap::new()));
    }

    #[test]
    fn the_token_is_read_from_a_bearer_header_or_the_cookie() {
        assert_eq!(bearer(&with(header::AUTHORIZATION, "Bearer abc")), Some("abc"));
        assert_eq!(bearer(&with(header::AUTHORIZATION, "Basic abc")), None);
        assert_eq!(cookie(&with(header::COOKIE, "a=1; runner_token=xyz; b=2")), Some("xyz"));
        assert_eq!(cookie(&with(header::COOKIE, "runner_tokens=xyz")), None);
        assert!(same("abc", "abc") && !same("abd", "abc") && !same("ab", "abc"));
    }
}
