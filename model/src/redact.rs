//! Keeping the API key out of every text that leaves the runtime.

/// Replaces an API key with `[redacted]` wherever it appears. Its `Debug` never shows the key.
#[derive(Clone, Default)]
pub struct Redactor {
    secret: Option<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("secret", &self.secret.as_ref().map(|_| "[redacted]")).finish()
    }
}

impl Redactor {
    /// A redactor for `secret`; an empty or absent secret redacts nothing.
    pub fn new(secret: Option<&str>) -> Self {
        Redactor { secret: secret.filter(|s| !s.is_empty()).map(str::to_owned) }
    }

    /// `text` with every occurrence of the secret replaced.
    pub fn apply(&self, text: &str) -> String {
        match &self.secret {
            Some(secret) => text.replace(secret.as_str(), "[redacted]"),
            None => text.to_owned(),
        }
    }
}

/// At most `limit` characters of `text`, with a note when it was cut.
pub fn excerpt(text: &str, limit: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}… ({} more bytes)", &text[..cut], text.len() - cut),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_every_occurrence() {
        let redactor = Redactor::new(Some("sk-123"));
        assert_eq!(redactor.apply("Bearer sk-123 and sk-123"), "Bearer [redacted] and [redacted]");
        assert_eq!(Redactor::new(Some("")).apply("text"), "text");
    }

    #[test]
    fn excerpt_cuts_on_characters() {
        assert_eq!(excerpt("héllo", 10), "héllo");
        assert_eq!(excerpt("héllo", 2), "hé… (3 more bytes)");
    }
}
