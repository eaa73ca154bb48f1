//! Hiding the password of a database URL before it appears in any message.

/// `url` with its password replaced by `***`: the one in `user:password@` and a `password=`
/// parameter, in URL or `key=value` form.
pub fn redact(url: &str) -> String {
    let mut shown = url.to_owned();
    if let Some(scheme_end) = shown.find("://") {
        let authority_start = scheme_end + 3;
        let authority_end = shown[authority_start..].find(['/', '?']).map_or(shown.len(), |i| authority_start + i);
        if let Some(at) = shown[authority_start..authority_end].rfind('@') {
            let userinfo = &shown[authority_start..authority_start + at];
            if let Some(colon) = userinfo.find(':') {
                shown.replace_range(authority_start + colon + 1..authority_start + at, "***");
            }
        }
    }
    hide_parameter(&shown)
}

/// Replaces the value of every `password=` parameter (after `?`, `&`, a space or at the start).
fn hide_parameter(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("password=") {
        let starts_word = found == 0 || matches!(rest.as_bytes()[found - 1], b'?' | b'&' | b' ');
        let value_start = found + "password=".len();
        out.push_str(&rest[..value_start]);
        rest = &rest[value_start..];
        if starts_word {
            let end = rest.find(['&', ' ']).unwrap_or(rest.len());
            out.push_str("***");
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_hidden_wherever_the_url_holds_them() {
        assert_eq!(redact("postgres://u:s3cret@db:5432/x"), "postgres://u:***@db:5432/x");
        assert_eq!(redact("postgresql://u:p@ss@db/x?sslmode=off"), "postgresql://u:***@db/x?sslmode=off");
        assert_eq!(redact("postgres://db/x?user=u&password=s3cret&a=b"), "postgres://db/x?user=u&password=***&a=b");
        assert_eq!(redact("host=db password=s3cret user=u"), "host=db password=*** user=u");
        assert_eq!(redact("postgres://u@db/x"), "postgres://u@db/x");
        assert_eq!(redact("postgres://db/x?options=-csearch_path%3Dy"), "postgres://db/x?options=-csearch_path%3Dy");
    }
}
