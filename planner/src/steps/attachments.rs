//! The links and files a step mentions.

/// Characters that end a link: whitespace is handled by the caller; these never belong to
/// a URL written in prose.
const NOT_IN_LINK: &[char] = &['<', '>', '"', '`', '|', '{', '}', '\\', '^'];

/// The `http://` and `https://` links in a text, in order, without duplicates. Trailing
/// punctuation and unbalanced closing brackets are not part of a link.
pub(super) fn links(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = find_scheme(&text[from..]) {
        let start = from + at;
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || NOT_IN_LINK.contains(&c))
            .map_or(text.len(), |n| start + n);
        from = end.max(start + 1);
        let preceded = start.checked_sub(1).map(|i| bytes[i]);
        if preceded.is_some_and(|b| b.is_ascii_alphanumeric()) {
            continue;
        }
        let link = trim_link(&text[start..end]);
        let host = link.split_once("://").map_or("", |(_, rest)| rest);
        if host.starts_with(|c: char| c.is_alphanumeric() || c == '[') && !out.iter().any(|l| l == link) {
            out.push(link.to_owned());
        }
    }
    out
}

/// The offset of the next `http://` or `https://`, in any case.
fn find_scheme(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i + 7 <= bytes.len() {
        if bytes[i] == b'h' || bytes[i] == b'H' {
            let rest = &bytes[i..];
            let http = rest.len() >= 7 && rest[..7].eq_ignore_ascii_case(b"http://");
            let https = rest.len() >= 8 && rest[..8].eq_ignore_ascii_case(b"https://");
            if http || https {
                return Some(i);
            }
        }
        i += 1;
    }
    None
}

/// A link without the punctuation that ends the sentence around it.
fn trim_link(link: &str) -> &str {
    let mut link = link;
    loop {
        let Some(last) = link.chars().last() else { return link };
        let strip = match last {
            '.' | ',' | ';' | ':' | '!' | '?' | '\'' | '*' => true,
            ')' => link.matches('(').count() < link.matches(')').count(),
            ']' => link.matches('[').count() < link.matches(']').count(),
            _ => false,
        };
        if !strip {
            return link;
        }
        link = &link[..link.len() - last.len_utf8()];
    }
}

/// The relative paths in a text that `exists` confirms, as written, without duplicates:
/// words starting with `./` or `../`, and words with a `/` or a file extension.
pub(super) fn files(text: &str, exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || c == '`') {
        let word = word
            .trim_start_matches(['(', '[', '<', '"', '\''])
            .trim_end_matches([')', ']', '>', '"', '\'', '.', ',', ';', ':', '!', '?']);
        if is_path_like(word) && !out.iter().any(|f| f == word) && exists(word) {
            out.push(word.to_owned());
        }
    }
    out
}

fn is_path_like(word: &str) -> bool {
    if word.is_empty()
        || word.starts_with('/')
        || word.contains("://")
        || word.contains("..") && !word.starts_with("../")
    {
        return false;
    }
    let path_chars = word.chars().all(|c| c.is_alphanumeric() || "._-/~+@%=".contains(c));
    if !path_chars {
        return false;
    }
    if word.starts_with("./") || word.starts_with("../") {
        return word.len() > 3;
    }
    let extension = word.rsplit_once('.').map(|(stem, ext)| {
        !stem.is_empty()
            && (1..=8).contains(&ext.len())
            && ext.bytes().all(|b| b.is_ascii_alphanumeric())
            && ext.bytes().any(|b| b.is_ascii_alphabetic())
    });
    word.contains('/') && word.chars().any(char::is_alphanumeric) || extension == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_lose_sentence_punctuation() {
        assert_eq!(
            links("See https://example.com/spec.pdf. Also (http://x.org/a_(b)), HTTPS://Y.io/?q=1! and https://"),
            ["https://example.com/spec.pdf", "http://x.org/a_(b)", "HTTPS://Y.io/?q=1"]
        );
        assert!(links("xhttps://no.pe").is_empty());
    }

    #[test]
    fn files_must_exist() {
        let exists = |f: &str| matches!(f, "./a.md" | "docs/b.txt" | "c.rs");
        assert_eq!(
            files("Read ./a.md, `docs/b.txt` and c.rs; not ./gone.md, e.g. or and/or", &exists),
            ["./a.md", "docs/b.txt", "c.rs"]
        );
    }
}
