//! Counting tokens with a real BPE tokenizer, loaded once per process.

use std::fmt;

use tiktoken_rs::CoreBPE;

/// The BPE vocabulary used to count tokens; `O200k` (GPT-4o and later) is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tokenizer {
    /// `o200k_base`, used by GPT-4o, GPT-4.1 and the o-series.
    #[default]
    O200k,
    /// `cl100k_base`, used by GPT-4 and GPT-3.5.
    Cl100k,
}

/// The names [`Tokenizer::named`] accepts.
pub const TOKENIZER_NAMES: [&str; 4] = manifest::TOKENIZERS;

/// A tokenizer name that is not one of [`TOKENIZER_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("unknown tokenizer `{name}`; expected one of o200k_base, o200k, cl100k_base, cl100k")]
#[diagnostic(
    code(context::unknown_tokenizer),
    help("set the provider's `tokenizer` to `o200k_base` (the default) or `cl100k_base`")
)]
pub struct UnknownTokenizer {
    /// The name given.
    pub name: String,
}

impl Tokenizer {
    /// The tokenizer of an agent's provider: o200k for agents without one (command, mock,
    /// none) and providers that name none.
    pub fn of_agent(plan: &manifest::Plan, agent: Option<&str>) -> Tokenizer {
        let provider = agent
            .and_then(|name| plan.agents.get(name))
            .and_then(|agent| match &agent.runtime {
                manifest::plan::Runtime::Llm { provider, .. } => provider.as_ref(),
                _ => None,
            })
            .and_then(|provider| plan.providers.get(&provider.value));
        Tokenizer::named(provider.and_then(|p| p.tokenizer.as_deref())).unwrap_or_default()
    }

    /// The tokenizer called `name` (`o200k_base`/`o200k`, `cl100k_base`/`cl100k`); `None` means
    /// the default, [`Tokenizer::O200k`].
    pub fn named(name: Option<&str>) -> Result<Tokenizer, UnknownTokenizer> {
        match name {
            None | Some("o200k_base" | "o200k") => Ok(Tokenizer::O200k),
            Some("cl100k_base" | "cl100k") => Ok(Tokenizer::Cl100k),
            Some(other) => Err(UnknownTokenizer { name: other.to_owned() }),
        }
    }

    /// The canonical name, as tiktoken spells it.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k_base",
            Tokenizer::Cl100k => "cl100k_base",
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        // tiktoken-rs keeps each vocabulary in a process-wide LazyLock.
        match self {
            Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
            Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Above this many bytes a text is counted in pieces: the tokenizer's backtracking regex
/// panics on, and is quadratic in, very long runs (a megabyte of spaces, say).
const PIECE: usize = 4096;

/// The number of tokens in `text`, treating special-token text such as `<|endoftext|>` as
/// ordinary text; never panics.
///
/// Long texts are counted piece by piece, cut where both tokenizers always end a token (so
/// the sum is exact); only a run of [`PIECE`] bytes with no such place is cut arbitrarily,
/// which may miscount it by a token or so.
pub fn count(text: &str, tokenizer: Tokenizer) -> usize {
    count_in_pieces(text, tokenizer.bpe(), PIECE)
}

fn count_in_pieces(text: &str, bpe: &CoreBPE, piece: usize) -> usize {
    let mut total = 0;
    let mut rest = text;
    while rest.len() > piece {
        let cut = token_boundary(rest, piece);
        total += bpe.encode_ordinary(&rest[..cut]).len();
        rest = &rest[cut..];
    }
    total + bpe.encode_ordinary(rest).len()
}

/// A cut in `text` (`0 < cut <= limit`, on a char boundary) where, preferably, every token
/// ends: after a non-space char followed by a space, or after a newline followed by a
/// char that is neither whitespace nor `/`. No token of o200k or cl100k spans either place.
fn token_boundary(text: &str, limit: usize) -> usize {
    let mut fallback = None;
    let mut at = limit;
    while at > 0 {
        if text.is_char_boundary(at) {
            fallback.get_or_insert(at);
            let before = text[..at].chars().next_back();
            let after = text[at..].chars().next();
            match (before, after) {
                (Some(b), Some(' ')) if !b.is_whitespace() => return at,
                (Some('\n'), Some(a)) if !a.is_whitespace() && a != '/' => return at,
                _ => {}
            }
        }
        at -= 1;
    }
    // `None` only when `limit` falls inside the first char: cut after that char.
    fallback.unwrap_or_else(|| (limit.max(1)..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_known_strings() {
        assert_eq!(count("", Tokenizer::O200k), 0);
        assert_eq!(count("hello world", Tokenizer::O200k), 2);
        assert_eq!(count("hello world", Tokenizer::Cl100k), 2);
    }

    #[test]
    fn special_tokens_are_ordinary_text() {
        assert!(count("<|endoftext|>", Tokenizer::O200k) > 1);
        assert!(count("<|endoftext|><|fim_prefix|>", Tokenizer::Cl100k) > 1);
    }

    #[test]
    fn names_are_accepted() {
        assert_eq!(Tokenizer::named(None), Ok(Tokenizer::O200k));
        assert_eq!(Tokenizer::named(Some("o200k")), Ok(Tokenizer::O200k));
        assert_eq!(Tokenizer::named(Some("o200k_base")), Ok(Tokenizer::O200k));
        assert_eq!(Tokenizer::named(Some("cl100k")), Ok(Tokenizer::Cl100k));
        assert_eq!(Tokenizer::named(Some("cl100k_base")), Ok(Tokenizer::Cl100k));
        for name in TOKENIZER_NAMES {
            assert!(Tokenizer::named(Some(name)).is_ok());
        }
    }

    #[test]
    fn unknown_names_are_diagnosed() {
        use miette::Diagnostic;
        let error = Tokenizer::named(Some("gpt2")).unwrap_err();
        assert_eq!(error.name, "gpt2");
        assert_eq!(error.code().map(|c| c.to_string()).as_deref(), Some("context::unknown_tokenizer"));
        let message = error.to_string();
        for name in TOKENIZER_NAMES {
            assert!(message.contains(name), "{message}");
        }
        assert!(Tokenizer::named(Some("")).is_err());
    }

    #[test]
    fn pathological_runs_do_not_panic() {
        // A megabyte of spaces makes the tokenizer itself panic.
        assert!(count(&" ".repeat(600_000), Tokenizer::O200k) > 0);
        for unit in ["\n", "A", "é"] {
            assert!(count(&unit.repeat(50_000), Tokenizer::O200k) > 0);
        }
    }

    #[test]
    fn counting_in_pieces_is_exact_at_token_boundaries() {
        let samples = [
            "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n// done\n/path/to\n",
            "Hello, world! This is a test.  Two  spaces,\ttabs and\r\nCRLF lines.\n\n\nend",
            "!!!\n\n/etc/passwd\n?? \n  indented\n-- item\n1234567 89 0.5\n's 've 're\n",
            "日本語のテキスト と スペース。 Ünïcödé wörds ça va\n\u{3000}wide space",
        ];
        for tokenizer in [Tokenizer::O200k, Tokenizer::Cl100k] {
            let bpe = tokenizer.bpe();
            for sample in samples {
                let text = sample.repeat(7);
                let whole = bpe.encode_ordinary(&text).len();
                for piece in [40, 64, 100] {
                    assert_eq!(count_in_pieces(&text, bpe, piece), whole, "{tokenizer} {piece} {text:?}");
                }
            }
        }
    }
}
