//! The runner plan format.
//!
//! [`load_file`] reads a manifest (YAML or JSON, enveloped or in the bare seed form) into a
//! [`Loaded`]: the normalised [`Plan`], its [`TaskGraph`] and every [`Diagnostic`], each with
//! a stable code and the exact span of the key or value it concerns. Nothing here panics on
//! any input, and nothing does IO beyond reading the plan and checking its attachments exist.

mod answer;
pub mod critic;
mod decimal;
mod diagnostic;
mod duration;
mod fields;
pub mod fix;
mod graph;
mod json;
mod json_strings;
mod load;
mod node_path;
mod normalize;
mod plain_yaml;
pub mod plan;
pub mod plan_test;
mod problem;
mod read;
mod rendered;
pub mod schema;
mod snippet;
mod source;
pub mod splice;
pub mod subplan;
pub mod template;
mod text;
mod tree;
mod validate;
mod yaml;

pub use answer::{AnswerError, Found, JsonSyntax, find_json};
pub use decimal::digits;
pub use diagnostic::{Diagnostic, Problem, Severity, edit_distance};
pub use duration::{Duration, DurationError};
pub use fields::{API_VERSION, FieldDoc, TOKENIZERS, WORKFLOW_KEYS, field_at, fields_at};
pub use graph::{Cycles, TaskGraph, TaskIdx};
pub use load::{Loaded, load_file, load_file_with_limit, load_str};
pub use node_path::NodePath;
pub use plan::Plan;
pub use rendered::Rendered;
pub use source::{Loc, MAX_PLAN_BYTES, PLAN_BYTES_CEILING, Source, Span, plan_limit, set_plan_limit};
pub use splice::{Spliced, splice};
pub use text::Text;
