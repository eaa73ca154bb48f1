//! What the machine's integration tests share: a run state for plans that count no tokens.

use machine::tokens::{TokenCounter, Tokenizer};

/// A counter for runs that count nothing: the tests' plans have no token budget and no summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uncounted;

impl TokenCounter for Uncounted {
    fn count(&self, _text: &str, _tokenizer: Tokenizer) -> usize {
        unreachable!("a plan without a token budget or a summary counts no tokens")
    }
}

/// The run state of these tests.
pub type RunState = machine::RunState<Uncounted>;
