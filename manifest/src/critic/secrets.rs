//! Secrets on the wire: an API key or secret header sent over plain `http://` to a host other
//! than this machine, where anyone on the network path can read it.

use crate::plan::{Plan, Runtime};
use crate::source::Loc;

use super::found::{Found, push_whole};
use super::{Finding, Lint};

pub(super) fn check(plan: &Plan, found: &mut Vec<Found>) {
    for (name, provider) in &plan.providers {
        let (Some(variable), Some(host)) = (&provider.api_key_env, remote_plain_host(&provider.base_url)) else {
            continue;
        };
        push_whole(found, finding(format!("provider `{name}`"), &variable.value, host, &variable.loc));
    }
    for (name, agent) in &plan.agents {
        let Runtime::Http { url, .. } = &agent.runtime else { continue };
        let Some(host) = remote_plain_host(&url.value) else { continue };
        if let Some(variable) = agent.runtime.secret_variables().first() {
            push_whole(found, finding(format!("http agent `{name}`"), &variable.value, host, &url.loc));
        }
    }
}

fn finding(sender: String, variable: &str, host: &str, loc: &Loc) -> Finding {
    let lint = Lint::PlainHttpSecret { sender, variable: variable.to_owned(), host: host.to_owned() };
    Finding::warning(lint, None, loc)
        .label("sent unencrypted")
        .help("use an `https://` address, or a server on this machine (localhost, 127.0.0.1, ::1)")
}

/// The host of a plain `http://` address, unless it is this machine; `None` for any other scheme.
fn remote_plain_host(url: &str) -> Option<&str> {
    let rest = url.get(..7).filter(|scheme| scheme.eq_ignore_ascii_case("http://")).map(|_| &url[7..])?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    (!is_this_machine(host)).then_some(host)
}

fn is_this_machine(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host == "::1"
        || host.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::remote_plain_host;

    #[test]
    fn only_plain_http_to_another_machine_is_flagged() {
        let cases = [
            ("http://api.example.com/v1", Some("api.example.com")),
            ("HTTP://10.0.0.5:8080/v1", Some("10.0.0.5")),
            ("http://user@models.internal:80", Some("models.internal")),
            ("http://[2001:db8::1]:8080/v1", Some("2001:db8::1")),
            ("http://localhost:11434/v1", None),
            ("http://LOCALHOST/v1", None),
            ("http://127.0.0.1:8089/v1", None),
            ("http://127.1.2.3/v1", None),
            ("http://[::1]:8080/v1", None),
            ("http://ollama.localhost/v1", None),
            ("https://api.example.com/v1", None),
            ("ftp://api.example.com", None),
            ("http:", None),
        ];
        for (url, host) in cases {
            assert_eq!(remote_plain_host(url), host, "{url}");
        }
    }
}
