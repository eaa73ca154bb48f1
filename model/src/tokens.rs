//! Counting tokens with a real BPE tokenizer (tiktoken), loaded once per process: the
//! [`TokenCounter`] that `engine::RunState` counts with, and the planner fits prompts by.

use tiktoken_rs::CoreBPE;

pub use machine::tokens::{Meter, TOKENIZER_NAMES, TokenCounter, Tokenizer, UnknownTokenizer};

/// The token counter of the engine and the planner: tiktoken's vocabularies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tiktoken;

impl TokenCounter for Tiktoken {
    fn count(&self, text: &str, tokenizer: Tokenizer) -> usize {
        count(text, tokenizer)
    }
}

/// A [`Meter`] counting with [`Tiktoken`] in `tokenizer`'s vocabulary.
pub fn meter(tokenizer: Tokenizer) -> Meter<'static> {
    Meter::new(&Tiktoken, tokenizer)
}

fn bpe(tokenizer: Tokenizer) -> &'static CoreBPE {
    // tiktoken-rs keeps each vocabulary in a process-wide LazyLock.
    match tokenizer {
        Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
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
    count_in_pieces(text, bpe(tokenizer), PIECE)
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
            let bpe = bpe(tokenizer);
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
