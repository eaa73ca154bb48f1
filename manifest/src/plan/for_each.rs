//! `for_each`: what a map task runs over.

use serde::{Deserialize, Serialize};

/// What a map task runs over: one item task per element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ForEach {
    /// An expression evaluated once the task's dependencies are done, such as
    /// `tasks.search.output.results`; it must yield a list.
    Expr(String),
    /// A list written in the plan.
    List(Vec<serde_json::Value>),
}

impl ForEach {
    /// The expression, when the list is only known at run time.
    pub fn expr(&self) -> Option<&str> {
        match self {
            ForEach::Expr(expr) => Some(expr),
            ForEach::List(_) => None,
        }
    }
}
