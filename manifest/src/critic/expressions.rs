//! The expressions of `when` and `for_each`: the tasks they read, whether one is constant, and
//! the comparisons of a task's status with a word. Each is read once, in time linear in its length.

use std::cell::OnceCell;

use minijinja::Environment;

use crate::plan::{ForEach, Read, Task};
use crate::template::expression;

/// Whether a read is in the task's `when` or `for_each` rather than its input or prompt: the
/// loader narrows a read's location to where the text names it. A plan with no locations (read
/// back from a run's log) has its reads counted as the input's.
pub(super) fn in_expression(task: &Task, read: &Read) -> bool {
    let extras = task.extras();
    let (start, end) = (read.loc.span.offset(), read.loc.span.offset() + read.loc.span.len());
    let inside = |loc: &crate::source::Loc| {
        let span = loc.span;
        !span.is_empty() && span.offset() <= start && end <= span.offset() + span.len()
    };
    extras.when.as_ref().is_some_and(|when| inside(&when.loc))
        || extras.for_each.as_ref().is_some_and(|for_each| inside(&for_each.loc))
}

/// Reads `when` and `for_each` expressions with one engine, made only when a plan has one.
#[derive(Default)]
pub(super) struct Expressions {
    env: OnceCell<Environment<'static>>,
}

/// What a task's `when` and `for_each` read of other tasks.
pub(super) enum ExpressionReads {
    /// The tasks they name, by id.
    Named(Vec<String>),
    /// Possibly any task: one reads `tasks` other than by name (`tasks[x]`), or does not parse.
    Any,
}

impl ExpressionReads {
    /// Whether they may read task `id`.
    pub(super) fn includes(&self, id: &str) -> bool {
        match self {
            ExpressionReads::Named(ids) => ids.iter().any(|read| read == id),
            ExpressionReads::Any => true,
        }
    }
}

impl Expressions {
    fn env(&self) -> &Environment<'static> {
        self.env.get_or_init(Environment::new)
    }

    /// Whether an expression that reads no variable and calls no function, such as `1 > 2`,
    /// holds; `None` when it reads something, does not parse or fails.
    pub(super) fn constant(&self, text: &str) -> Option<bool> {
        let compiled = self.env().compile_expression(text).ok()?;
        if !compiled.undeclared_variables(false).is_empty() {
            return None;
        }
        compiled.eval(minijinja::context! {}).ok().map(|value| value.is_true())
    }

    /// The tasks a task's `when` and `for_each` expressions read.
    pub(super) fn reads(&self, task: &Task) -> ExpressionReads {
        let extras = task.extras();
        let for_each = extras.for_each.as_ref().and_then(|f| match &f.value {
            ForEach::Expr(text) => Some(text.as_str()),
            ForEach::List(_) => None,
        });
        let mut ids = Vec::new();
        for text in [extras.when.as_ref().map(|w| w.value.as_str()), for_each].into_iter().flatten() {
            let Ok(compiled) = self.env().compile_expression(expression(text)) else { return ExpressionReads::Any };
            for path in compiled.undeclared_variables(true) {
                let mut parts = path.split('.');
                if parts.next() != Some("tasks") {
                    continue;
                }
                match parts.next() {
                    Some(id) => ids.push(id.to_owned()),
                    None => return ExpressionReads::Any,
                }
            }
        }
        ExpressionReads::Named(ids)
    }
}

/// A comparison of a task's status with a word in an expression: `tasks.ID.status == "WORD"`,
/// either way round, with the id written `tasks.ID` or `tasks["ID"]`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct StatusComparison<'a> {
    /// The task whose status is compared.
    pub task: &'a str,
    /// The word it is compared with.
    pub word: &'a str,
    /// The comparison as written.
    pub text: &'a str,
}

/// A piece of an expression, as far as finding status comparisons needs: `(start, end, kind)`.
#[derive(Clone, Copy)]
enum Token<'a> {
    /// `tasks.ID.status`, with the id.
    Status(&'a str),
    /// A quoted string, without its quotes.
    Text(&'a str),
    /// `==`.
    Equals,
    /// Anything else.
    Other,
}

/// Every `tasks.ID.status == "WORD"` (or `"WORD" == tasks.ID.status`) in an expression.
pub(super) fn status_comparisons(text: &str) -> Vec<StatusComparison<'_>> {
    let tokens = tokens(text);
    let mut comparisons = Vec::new();
    for window in tokens.windows(3) {
        let [(start, _, first), (_, _, Token::Equals), (_, end, last)] = window else { continue };
        let (task, word) = match (first, last) {
            (Token::Status(task), Token::Text(word)) | (Token::Text(word), Token::Status(task)) => (*task, *word),
            _ => continue,
        };
        comparisons.push(StatusComparison { task, word, text: &text[*start..*end] });
    }
    comparisons
}

/// The tokens of an expression with where each starts and ends.
fn tokens(text: &str) -> Vec<(usize, usize, Token<'_>)> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if b.is_ascii_whitespace() {
            at += 1;
            continue;
        }
        let start = at;
        let token = if b == b'"' || b == b'\'' {
            let close = closing_quote(bytes, at);
            at = close.map_or(bytes.len(), |c| c + 1);
            match close {
                Some(close) => Token::Text(&text[start + 1..close]),
                None => Token::Other,
            }
        } else if b == b'=' && bytes.get(at + 1) == Some(&b'=') {
            at += 2;
            Token::Equals
        } else if is_ident(b) {
            while at < bytes.len() && (is_ident(bytes[at]) || bytes[at] == b'.') {
                at += 1;
            }
            match status_of(text, start, &mut at) {
                Some(task) => Token::Status(task),
                None => Token::Other,
            }
        } else {
            // One byte of an operator or bracket; a multi-byte character is skipped whole.
            at += text[at..].chars().next().map_or(1, char::len_utf8);
            Token::Other
        };
        tokens.push((start, at, token));
    }
    tokens
}

/// The task of `tasks.ID.status` or `tasks["ID"].status` starting at `start`, whose dotted
/// name runs to `*end`; moves `*end` past a bracketed form.
fn status_of<'a>(text: &'a str, start: usize, end: &mut usize) -> Option<&'a str> {
    let word = &text[start..*end];
    if let Some(id) = word.strip_prefix("tasks.").and_then(|rest| rest.strip_suffix(".status")) {
        return (!id.is_empty() && !id.contains('.')).then_some(id);
    }
    if word != "tasks" {
        return None;
    }
    let rest = &text[*end..];
    let quote = rest.strip_prefix('[')?.chars().next().filter(|&c| c == '"' || c == '\'')?;
    let inner = &rest[2..];
    let close = inner.find(quote)?;
    let after = inner[close + 1..].strip_prefix("].status")?;
    if after.bytes().next().is_some_and(|b| is_ident(b) || b == b'.') {
        return None;
    }
    *end += 2 + close + 1 + "].status".len();
    Some(&inner[..close])
}

/// The position of the quote that closes the string opened at `open`, past backslash escapes.
fn closing_quote(bytes: &[u8], open: usize) -> Option<usize> {
    let quote = bytes[open];
    let mut at = open + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b if b == quote => return Some(at),
            _ => at += 1,
        }
    }
    None
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compared(text: &str) -> Vec<(&str, &str, &str)> {
        status_comparisons(text).into_iter().map(|c| (c.task, c.word, c.text)).collect()
    }

    #[test]
    fn status_comparisons_are_found_either_way_round_and_in_either_spelling() {
        assert_eq!(
            compared(r#"tasks.fetch.status == "failed""#),
            [("fetch", "failed", r#"tasks.fetch.status == "failed""#)]
        );
        assert_eq!(compared("'done'==tasks.a.status or x"), [("a", "done", "'done'==tasks.a.status")]);
        assert_eq!(
            compared(r#"tasks["a-b"].status == 'skipped'"#),
            [("a-b", "skipped", r#"tasks["a-b"].status == 'skipped'"#)]
        );
        assert_eq!(
            compared(r#"tasks.a.status == "x" and tasks.b.status == "y""#)
                .iter()
                .map(|c| (c.0, c.1))
                .collect::<Vec<_>>(),
            [("a", "x"), ("b", "y")]
        );
    }

    #[test]
    fn other_comparisons_are_not_status_comparisons() {
        for text in [
            r#"tasks.a.status != "failed""#,
            r#"tasks.a.output.status == "failed""#,
            r#"tasks.a.status_code == "failed""#,
            r#"tasks.a.status | upper == "FAILED""#,
            r#"tasks.a.status >= "failed""#,
            r#"tasks.a.status in ["failed"]"#,
            r#"mytasks.a.status == "failed""#,
            r#"tasks["a"].status.x == "failed""#,
            r#"tasks.a.status == vars.word"#,
            r#""tasks.a.status == 'failed'""#,
            "tasks.a.status == \"unclosed",
            "ü == tasks.a.status",
        ] {
            assert_eq!(compared(text), [], "{text}");
        }
    }

    #[test]
    fn only_expressions_that_read_nothing_are_constant() {
        let expressions = Expressions::default();
        assert_eq!(expressions.constant("false"), Some(false));
        assert_eq!(expressions.constant("1 > 2"), Some(false));
        assert_eq!(expressions.constant("[] | length > 0"), Some(false));
        assert_eq!(expressions.constant("true"), Some(true));
        for text in ["vars is defined", "vars.deep", "range(3) | length > 5", "1 +", "'a' * 100000000000 == ''"] {
            assert_eq!(expressions.constant(text), None, "{text}");
        }
    }
}
