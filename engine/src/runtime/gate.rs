//! The built-in synthesis gate, for gates with no agent: its inputs passed through under its
//! output cap (about four bytes a token), cut at a line or word boundary with a marker.

use tokio_util::sync::CancellationToken;

use super::{AgentRuntime, Attempt, Pending, Reply};

/// Passes a gate's rendered input through, within `max_output_tokens`.
#[derive(Debug, Clone, Copy)]
pub struct GateRuntime;

/// Cuts `text` to at most `limit` bytes at the last line or word boundary, marking the cut.
pub fn cap(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let marker = "\n[... condensed: the rest was cut to fit the gate's output cap]";
    let budget = limit.saturating_sub(marker.len());
    let mut end = budget.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    let cut = head.rfind('\n').or_else(|| head.rfind(' ')).unwrap_or(end);
    format!("{}{marker}", head[..cut].trim_end())
}

impl AgentRuntime for GateRuntime {
    fn run(&self, attempt: Attempt, _: CancellationToken) -> Pending {
        let text = match attempt.max_output_tokens {
            Some(tokens) => cap(&attempt.input, tokens as usize * 4),
            None => attempt.input.to_string(),
        };
        Box::pin(std::future::ready(Reply::Output { text, tokens: None }))
    }
}

#[cfg(test)]
mod tests {
    use super::cap;

    #[test]
    fn cap_never_cuts_a_word_and_says_it_cut() {
        let text = "alpha beta gamma delta ".repeat(50);
        let capped = cap(&text, 200);
        assert!(capped.len() <= 200, "{}", capped.len());
        assert!(capped.contains("condensed"));
        let kept = capped.split('\n').next().unwrap_or_default();
        assert!(kept.split(' ').all(|w| ["alpha", "beta", "gamma", "delta"].contains(&w)), "{kept}");
        assert_eq!(cap("short", 200), "short");
    }
}
