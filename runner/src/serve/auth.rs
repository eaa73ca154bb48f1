//! Who may talk to the server: every request names the server as its host by the one rule of
//! [`host::check`] (without a token, by a name of this machine: the server is on loopback, and
//! a page of another site must not reach it by renaming its own host); a state-changing one
//! comes from no browser or the server's own page; with a token set, every request carries it
//! (a bearer header, or the cookie a first visit with `?token=` sets, so the page's event
//! streams carry it too). Every response also forbids the page to load anything from
//! elsewhere or run inline script.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Served;
use super::error::{ApiError, ServeError};
use super::host;

/// The cookie that carries the token.
const COOKIE: &str = "runner_token";

/// The content security policy of every response: our own scripts, styles and images only.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                      connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The fewest characters a token may have.
const TOKEN_MIN: usize = 16;

/// The variable that gives the token when `--token` does not.
const TOKEN_VARIABLE: &str = "RUNNER_SERVE_TOKEN";

/// The token `--token` or else `RUNNER_SERVE_TOKEN` gives, `None` when neither gives one (an
/// empty value is none); refused when it is shorter than [`TOKEN_MIN`] or holds a character
/// other than a letter, a digit or `-._~`: those pass unchanged through the printed `?token=`
/// URL, a bearer header and the cookie.
pub fn token(flag: Option<&str>) -> Result<Option<String>, ServeError> {
    let (token, from) = match flag {
        Some(token) => (token.to_owned(), "--token"),
        None => (std::env::var(TOKEN_VARIABLE).unwrap_or_default(), TOKEN_VARIABLE),
    };
    if token.is_empty() {
        return Ok(None);
    }
    let chars = token.chars().count();
    let unsafe_chars = !token.chars().all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c));
    if chars < TOKEN_MIN || unsafe_chars {
        let other = if unsafe_chars { ", some of them other characters" } else { "" };
        return Err(ServeError::WeakToken { from, chars, other, min: TOKEN_MIN });
    }
    Ok(Some(token))
}

/// Lets a request through when it may be served, and marks every response with the page's
/// security headers.
pub async fn guard(State(served): State<Arc<Served>>, request: Request, next: Next) -> Response {
    let (mut response, set_cookie) = match admit(&served, &request) {
        Ok(set_cookie) => (next.run(request).await, set_cookie),
        Err(error) => (error.into_response(), None),
    };
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

/// Whether a request may be served: its host passes [`host::check`], a state-changing one
/// comes from no browser or the server's own page, and with a token set it carries the token.
/// Gives the token to set as a cookie when the request carried it in `?token=`.
fn admit(served: &Served, request: &Request) -> Result<Option<String>, ApiError> {
    let headers = request.headers();
    let own = host::check(request.uri(), headers, served.port, served.token.is_none())?;
    if !request.method().is_safe() {
        host::check_origin(headers, &own)?;
    }
    let Some(token) = &served.token else { return Ok(None) };
    if bearer(headers).or_else(|| cookie(headers)).is_some_and(|carried| same(carried, token)) {
        return Ok(None);
    }
    let query: Option<Query<HashMap<String, String>>> = Query::try_from_uri(request.uri()).ok();
    match query.as_ref().and_then(|q| q.get("token")) {
        Some(given) if same(given, token) => Ok(Some(token.clone())),
        _ => Err(ApiError::Unauthorized),
    }
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
    fn the_token_is_read_from_a_bearer_header_or_the_cookie() {
        assert_eq!(bearer(&with(header::AUTHORIZATION, "Bearer abc")), Some("abc"));
        assert_eq!(bearer(&with(header::AUTHORIZATION, "Basic abc")), None);
        assert_eq!(cookie(&with(header::COOKIE, "a=1; runner_token=xyz; b=2")), Some("xyz"));
        assert_eq!(cookie(&with(header::COOKIE, "runner_tokens=xyz")), None);
        assert!(same("abc", "abc") && !same("abd", "abc") && !same("ab", "abc"));
    }

    #[test]
    fn a_token_has_sixteen_characters_or_more_that_a_url_and_a_cookie_keep() {
        assert!(matches!(token(Some("")), Ok(None)), "an empty token is no token");
        assert!(matches!(token(Some("0123456789abcdef")), Ok(Some(_))));
        assert!(matches!(token(Some("A-b.c_d~0123456789")), Ok(Some(_))));
        for weak in [
            "   ",
            "0123456789abcde",
            "0123456789 abcdef",
            "0123456789abcdef\n",
            "0123456789abcdef;",
            "0123456789+abcdef",
            "0123456789%abcdef",
            "0123456789abcdéf",
        ] {
            assert!(matches!(token(Some(weak)), Err(ServeError::WeakToken { from: "--token", .. })), "{weak:?}");
        }
    }
}
