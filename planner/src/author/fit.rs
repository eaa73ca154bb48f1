//! Fitting the prompt to a model's context window.
//!
//! A prompt's tokens are counted with the provider's tokenizer and raised by a quarter,
//! because that tokenizer is rarely the model's own and smaller vocabularies split text finer
//! (SmolLM2's counts the author's prompt 13% higher than `o200k_base`). An eighth of the
//! window, at least 512 and at most 4,096 tokens, is left for the answer. The optional parts
//! of the system message ([`Parts`]) are left out, examples first, until the rest fits; a
//! prompt that does not fit even then is never sent.

use std::collections::BTreeMap;

use model::protocol::Message;
use model::tokens::{Tokenizer, count};

use super::prompt::Parts;

/// The context window assumed when neither the server nor the provider gives one.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 8192;

/// Tokens a chat template adds around each message, and once to start the answer.
const PER_MESSAGE: u64 = 4;
const PRIMING: u64 = 3;

/// A model's context window and where it was learnt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Its size in tokens.
    pub tokens: u64,
    /// Where it comes from, for messages: `the server's max_model_len`, `the default`...
    pub learnt_from: String,
}

impl Default for Window {
    fn default() -> Self {
        Window { tokens: DEFAULT_CONTEXT_WINDOW, learnt_from: "the default".to_owned() }
    }
}

/// The context windows of the models to ask and the tokenizer prompts are counted with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Windows {
    /// Each model's window; a model not here has `otherwise`.
    pub models: BTreeMap<String, Window>,
    /// The window of every other model.
    pub otherwise: Window,
    /// The provider's tokenizer.
    pub tokenizer: Tokenizer,
}

impl Windows {
    /// The window of `model`.
    pub fn of(&self, model: &str) -> &Window {
        self.models.get(model).unwrap_or(&self.otherwise)
    }
}

/// The tokens left for the answer in a window of `window` tokens.
pub fn answer_room(window: u64) -> u64 {
    (window / 8).clamp(512, 4096)
}

/// The most tokens the answer to `messages` may have: what `model`'s window leaves after the
/// prompt's estimate, sent as `max_tokens` so that prompt and answer together never overflow
/// the window (a fitted prompt leaves at least [`answer_room`]).
pub fn answer_limit(model: &str, windows: &Windows, messages: &[Message]) -> u64 {
    windows.of(model).tokens.saturating_sub(estimate(messages, windows.tokenizer))
}

/// The estimated tokens of `messages` as the model will count them.
pub fn estimate(messages: &[Message], tokenizer: Tokenizer) -> u64 {
    let counted: u64 = messages
        .iter()
        .map(|message| {
            let text = match message {
                Message::System { content } | Message::User { content } | Message::Tool { content, .. } => {
                    content.as_str()
                }
                Message::Assistant { content, .. } => content.as_str(),
            };
            count(text, tokenizer) as u64 + PER_MESSAGE
        })
        .sum::<u64>()
        + PRIMING;
    counted + counted / 4
}

/// A prompt too large for the model's context window, however much of it is left out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} does not fit: it needs about {needed} tokens with every optional part left out, and {room} more are \
     kept for the answer, but the context window of `{model}` is {window} tokens ({learnt_from}); shorten the request \
     or the template, use a model with a larger window, or, if the window is larger than that, set the provider's \
     `context_window`"
)]
pub struct TooLarge {
    /// `the prompt` or `the repair prompt`.
    pub what: &'static str,
    /// The model.
    pub model: String,
    /// The smallest prompt's estimated tokens.
    pub needed: u64,
    /// The tokens kept for the answer.
    pub room: u64,
    /// The window.
    pub window: u64,
    /// Where the window comes from.
    pub learnt_from: String,
}

/// The messages to send: the system message with as many optional parts as fit, the request,
/// then `tail` (a previous answer and the repair message), and the parts left out. `system`
/// gives the system message with the given parts.
pub(crate) fn fit(
    model: &str,
    windows: &Windows,
    system: &dyn Fn(Parts) -> String,
    user: &str,
    tail: &[Message],
) -> Result<(Vec<Message>, Parts), TooLarge> {
    let window = windows.of(model);
    let room = answer_room(window.tokens);
    let budget = window.tokens.saturating_sub(room);
    let mut needed = 0;
    for parts in Parts::LARGEST_FIRST {
        let mut messages = vec![Message::System { content: system(parts) }, Message::User { content: user.to_owned() }];
        messages.extend_from_slice(tail);
        needed = estimate(&messages, windows.tokenizer);
        if needed <= budget {
            return Ok((messages, parts));
        }
    }
    Err(TooLarge {
        what: if tail.is_empty() { "the prompt" } else { "the repair prompt" },
        model: model.to_owned(),
        needed,
        room,
        window: window.tokens,
        learnt_from: window.learnt_from.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system(parts: Parts) -> String {
        super::super::prompt::system("brief", None, parts)
    }

    fn windows(tokens: u64) -> Windows {
        let window = Window { tokens, learnt_from: "the test".to_owned() };
        Windows { models: BTreeMap::from([("m".to_owned(), window)]), ..Windows::default() }
    }

    #[test]
    fn the_room_for_the_answer_grows_with_the_window_within_bounds() {
        assert_eq!(answer_room(2048), 512);
        assert_eq!(answer_room(8192), 1024);
        assert_eq!(answer_room(1 << 20), 4096);
    }

    #[test]
    fn parts_are_left_out_examples_first_until_the_prompt_fits() {
        let sizes: Vec<u64> = Parts::LARGEST_FIRST
            .iter()
            .map(|&parts| estimate(&[Message::System { content: system(parts) }], Tokenizer::default()))
            .collect();
        assert!(sizes.windows(2).all(|pair| pair[0] > pair[1]), "each step leaves something out: {sizes:?}");
        for (index, &parts) in Parts::LARGEST_FIRST.iter().enumerate() {
            // The smallest window that holds this level's prompt picks it: the larger ones do not fit.
            let user = "Request: tea";
            let needed = estimate(
                &[Message::System { content: system(parts) }, Message::User { content: user.to_owned() }],
                Tokenizer::default(),
            );
            let mut tokens = needed;
            while tokens - answer_room(tokens) < needed {
                tokens += 1;
            }
            let (messages, chosen) = fit("m", &windows(tokens), &system, user, &[]).unwrap();
            assert_eq!(chosen, parts, "level {index}");
            assert!(estimate(&messages, Tokenizer::default()) <= tokens - answer_room(tokens));
        }
        assert_eq!(windows(1).of("other"), &Window::default(), "unknown models get the default window");
    }

    #[test]
    fn the_default_window_gets_the_schema_without_its_descriptions() {
        // docs/planning.md says so: the rules sent always must leave the bare schema room.
        let (_, chosen) = fit("m", &Windows::default(), &system, "Request: tea", &[]).unwrap();
        assert_eq!(chosen, Parts::BareSchema);
    }

    #[test]
    fn a_prompt_that_cannot_fit_is_refused_naming_the_window_and_its_size() {
        let error = fit("m", &windows(1024), &system, "Request: tea", &[]).unwrap_err();
        assert_eq!(error.window, 1024);
        assert_eq!(error.room, 512);
        assert!(error.needed > 512);
        let text = error.to_string();
        assert!(text.starts_with("the prompt does not fit"), "{text}");
        assert!(text.contains("`m` is 1024 tokens (the test)") && text.contains(&error.needed.to_string()), "{text}");
        let tail = [Message::User { content: "x ".repeat(10_000) }];
        let error = fit("m", &windows(8192), &system, "Request: tea", &tail).unwrap_err();
        assert_eq!(error.what, "the repair prompt");
    }
}
