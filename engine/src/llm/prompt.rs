//! The user message of an attempt: the rendered input, its attachments and the answer's
//! required shape.

use std::fmt::Write as _;

use manifest::plan::Attachment;
use model::LlmError;
use tokio::io::AsyncReadExt;

use crate::runtime::Attempt;

/// The most bytes of one attached file put into a prompt.
pub const FILE_CAP: u64 = 64 * 1024;

/// The user message for `attempt`: its input, links listed, files inlined (each capped at
/// [`FILE_CAP`]), and, with a schema, the instruction to answer with one conforming JSON object.
pub async fn user_message(attempt: &Attempt) -> Result<String, LlmError> {
    let mut text = attempt.input.to_string();
    let links: Vec<&str> = attempt
        .attachments
        .iter()
        .filter_map(|a| match a {
            Attachment::Link(url) => Some(url.as_str()),
            Attachment::File(_) => None,
        })
        .collect();
    if !links.is_empty() {
        text.push_str("\n\nLinks:");
        for link in links {
            let _ = write!(text, "\n- {link}");
        }
    }
    for attachment in &attempt.attachments {
        if let Attachment::File(name) = attachment {
            let (content, size) = read_capped(attempt, name).await?;
            let fence = fence_for(&content);
            let _ = write!(text, "\n\n## File: {name}\n\n{fence}\n{content}\n{fence}");
            if size > FILE_CAP {
                let _ = write!(
                    text,
                    "\n[truncated: `{name}` is {size} bytes; only the first {} KiB are shown]",
                    FILE_CAP / 1024
                );
            }
        }
    }
    if let Some(cap) = attempt.max_output_tokens {
        let _ = write!(text, "\n\nKeep the answer under {cap} tokens.");
    }
    if let Some(schema) = &attempt.schema {
        let pretty = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
        let _ = write!(
            text,
            "\n\nAnswer with one JSON object only, with no other text and no code fences. \
             It must conform to this JSON Schema:\n\n{pretty}"
        );
    }
    Ok(text)
}

/// The first [`FILE_CAP`] bytes of an attached file (as text) and its whole size.
async fn read_capped(attempt: &Attempt, name: &str) -> Result<(String, u64), LlmError> {
    let failed = |error: std::io::Error| LlmError::Attachment { file: name.to_owned(), reason: error.to_string() };
    let file = tokio::fs::File::open(attempt.workdir.join(name)).await.map_err(failed)?;
    let size = file.metadata().await.map_err(failed)?.len();
    let mut bytes = Vec::new();
    file.take(FILE_CAP).read_to_end(&mut bytes).await.map_err(failed)?;
    let size = size.max(bytes.len() as u64);
    let mut content = String::from_utf8_lossy(&bytes).into_owned();
    // A cut in the middle of a character leaves a replacement character at the end.
    if size > FILE_CAP && content.ends_with('\u{FFFD}') {
        content.pop();
    }
    Ok((content, size))
}

/// A code fence longer than any run of backticks in `content`.
fn fence_for(content: &str) -> String {
    let longest = content.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

#[cfg(test)]
mod tests {
    use super::fence_for;

    #[test]
    fn fence_outlasts_backticks_in_the_file() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ```` b"), "`````");
    }
}
