//! Token counting, as the machine sees it: a [`Tokenizer`] names a vocabulary and a
//! [`TokenCounter`] counts with it.
//!
//! The machine knows no tokenizer's code (that would pull a BPE library into the pure core);
//! the engine implements [`TokenCounter`] with tiktoken. A run's counter is a type parameter
//! of [`crate::RunState`], not a value handed in at run time: `engine::RunState` names the
//! engine's counter once, so the driver, `runner status`, a resume and a replan all fold the
//! same log with the same counter and get the same numbers, and a different counter is a
//! different type, never a silent swap.

use std::fmt;

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
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Counts the tokens of a text in a tokenizer's vocabulary.
pub trait TokenCounter {
    /// The number of tokens in `text`, treating special-token text such as `<|endoftext|>` as
    /// ordinary text; never panics.
    fn count(&self, text: &str, tokenizer: Tokenizer) -> usize;
}

/// A counter bound to one tokenizer: what the compactors measure a budget with.
#[derive(Clone, Copy)]
pub struct Meter<'a> {
    counter: &'a dyn TokenCounter,
    tokenizer: Tokenizer,
}

impl<'a> Meter<'a> {
    /// Counts with `counter` in `tokenizer`'s vocabulary.
    pub fn new(counter: &'a dyn TokenCounter, tokenizer: Tokenizer) -> Self {
        Meter { counter, tokenizer }
    }

    /// The number of tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        self.counter.count(text, self.tokenizer)
    }
}

impl fmt::Debug for Meter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Meter").field("tokenizer", &self.tokenizer).finish_non_exhaustive()
    }
}

/// Counting with tiktoken for the machine's own tests (the engine's counter also cuts very
/// long texts into pieces, which these tests never reach).
#[cfg(test)]
pub(crate) mod test_counter {
    use super::{Meter, TokenCounter, Tokenizer};

    /// tiktoken, whole texts at a time.
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) struct Tiktoken;

    impl TokenCounter for Tiktoken {
        fn count(&self, text: &str, tokenizer: Tokenizer) -> usize {
            let bpe = match tokenizer {
                Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
                Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
            };
            bpe.encode_ordinary(text).len()
        }
    }

    /// o200k with [`Tiktoken`].
    pub(crate) const T: Meter<'static> = Meter { counter: &Tiktoken, tokenizer: Tokenizer::O200k };

    /// The tokens of `text` under [`T`].
    pub(crate) fn count(text: &str) -> usize {
        T.count(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
