//! One description per manifest field: its name, the aliases the bare form reads, its doc
//! text and the shape of its value.
//!
//! These tables are the single place a field is described. The reader takes from them which
//! keys a mapping has (and so the "unknown field" suggestions), which aliases it reads and the
//! bounds it checks a number against; [`crate::schema`] builds the published JSON Schema from
//! the same tables, so the schema's fields, descriptions, bounds and words cannot drift from
//! what the loader reads. A task's table is declared with the plan's task types and their JSON
//! in one list (`plan/task.rs`, with [`declare`]'s macro), so a task field is described once;
//! the other normalised types in [`crate::plan`] are a different shape on purpose (gates become
//! tasks, an agent's fields become a `Runtime` variant), so they are written by hand. The reader
//! in `normalize/` maps one to the other, and `round_trip.rs` loads every declared field's
//! example, so a field the reader forgets fails a test.

mod agents;
mod control;
pub(crate) mod declare;
mod document;
mod lookup;
#[cfg(test)]
mod round_trip;
mod tasks;

pub(crate) use crate::plan::task::TASK;
pub use agents::TOKENIZERS;
pub(crate) use agents::{
    AGENT, APPROVAL, MOCK_OUTCOME, PRICE, PROVIDER, PROVIDER_KIND, RUNTIMES, SCHEMA_DIALECT, TOOL, TOOL_CHOICE, USAGE,
    USAGE_DEF,
};
pub(crate) use control::{BUDGET, CONTROL, GATE, GROUP, STRATEGY};
pub(crate) use declare::declare_task;
pub use document::{API_VERSION, WORKFLOW_KEYS};
pub(crate) use document::{
    COMPLEXITY, ENVELOPE, MANIFEST_DOC, METADATA, MISSION_ANALYSIS, NESTED_PLAN, SPEC, WORKFLOW_ALIASES,
};
pub use lookup::{FieldDoc, field_at, fields_at};
pub(crate) use tasks::{
    ACTION, ATTACHMENT, ATTACHMENT_DEF, FAILURE, FOR_EACH_DEF, ON_FAILURE, PHASE, RETRY_ON, TASK_KIND, VERIFICATION,
    VERIFICATION_DEF, VERIFICATION_KIND,
};

/// The shape of a field's value: what the reader accepts and the schema describes.
pub(crate) enum Shape {
    /// A string.
    Text,
    /// A string that matches a regular expression.
    Pattern(&'static str),
    /// Exactly this string.
    Const(&'static str),
    /// One of these strings, listed in place.
    Choice(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// A whole number that fits a `u32`, at least `min`.
    Count {
        /// The smallest value allowed.
        min: u32,
    },
    /// A whole number that fits a `u64`, at least `min`.
    Integer {
        /// The smallest value allowed.
        min: u64,
    },
    /// A number in `min..=max`.
    Number {
        /// The smallest value allowed.
        min: f64,
        /// The largest value allowed.
        max: f64,
    },
    /// Any value, read as JSON (a JSON Schema, say).
    Json,
    /// A list of values of one shape.
    List(&'static Shape),
    /// A list of at least one value of one shape.
    NonEmptyList(&'static Shape),
    /// A mapping from names to values of one shape.
    Map(&'static Shape),
    /// A named shape, defined once and referred to.
    Named(&'static Named),
}

/// A shape with a name and a description of its own; the schema lists it under `definitions`.
pub(crate) struct Named {
    /// The definition's name, such as `Task`.
    pub name: &'static str,
    /// What it is.
    pub doc: &'static str,
    /// What it holds.
    pub kind: Kind,
}

impl Named {
    /// The words of a named set of words; none for other shapes.
    pub fn words(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Words(words) => words,
            _ => &[],
        }
    }
}

/// What a named shape holds.
pub(crate) enum Kind {
    /// A mapping with these fields.
    Mapping(&'static Section),
    /// One of these words.
    Words(&'static [&'static str]),
    /// A value of any of these shapes.
    AnyOf(&'static [Shape]),
    /// A value of this shape, named for reuse (a duration, an argv).
    Alias(Shape),
}

/// The fields of one mapping.
pub(crate) struct Section {
    /// The fields, in the order the reader lists them in suggestions.
    pub fields: &'static [Field],
    /// How many of the leading fields are alternatives, of which the mapping gives exactly one
    /// (an attachment's kind, a mock response's outcome); 0 when there are none.
    pub exactly_one: usize,
}

impl Section {
    /// A mapping with these fields.
    pub const fn of(fields: &'static [Field]) -> Self {
        Section { fields, exactly_one: 0 }
    }

    /// A mapping that gives exactly one of these fields.
    pub const fn one_of(fields: &'static [Field]) -> Self {
        Section { fields, exactly_one: fields.len() }
    }

    /// A mapping that gives exactly one of its first `alternatives` fields, and any of the rest.
    pub const fn one_of_leading(alternatives: usize, fields: &'static [Field]) -> Self {
        Section { fields, exactly_one: alternatives }
    }

    /// The names of the fields of which exactly one is given.
    pub fn alternatives(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.fields[..self.exactly_one].iter().map(|field| field.name)
    }
}

/// One field a mapping may have.
pub(crate) struct Field {
    /// The canonical name.
    pub name: &'static str,
    /// Other names read in the bare form.
    pub aliases: &'static [&'static str],
    /// Whether the field exists only in the bare form, and what the enveloped form writes.
    pub bare_only: Option<&'static str>,
    /// What the field means, shown in the schema.
    pub doc: &'static str,
    /// The shape of its value.
    pub shape: Shape,
    /// Whether the enveloped form requires it.
    pub required: bool,
    /// The values of the mapping's deciding field (an agent's `runtime`, a verification's
    /// `type`, a policy's `action`) this field applies to; empty when it always applies.
    pub only_for: &'static [&'static str],
}

impl Field {
    /// An optional canonical field.
    pub const fn new(name: &'static str, shape: Shape, doc: &'static str) -> Self {
        Field { name, aliases: &[], bare_only: None, doc, shape, required: false, only_for: &[] }
    }

    /// A field read only in the bare form (under its name or its aliases); `instead` says what
    /// the enveloped form writes.
    pub const fn bare(name: &'static str, shape: Shape, instead: &'static str) -> Self {
        Field { name, aliases: &[], bare_only: Some(instead), doc: instead, shape, required: false, only_for: &[] }
    }

    /// The same field, also read under `aliases` in the bare form.
    pub const fn aliases(self, aliases: &'static [&'static str]) -> Self {
        Field { aliases, ..self }
    }

    /// The same field, applying only where the mapping's deciding field is one of `values`.
    pub const fn only_for(self, values: &'static [&'static str]) -> Self {
        Field { only_for: values, ..self }
    }

    /// The same field, required in the enveloped form.
    pub const fn required(self) -> Self {
        Field { required: true, ..self }
    }
}

impl Shape {
    /// The smallest and largest whole number the shape allows.
    pub fn whole_bounds(&self) -> (u64, u64) {
        match self {
            Shape::Count { min } => (u64::from(*min), u64::from(u32::MAX)),
            Shape::Integer { min } => (*min, u64::MAX >> 1),
            _ => (0, u64::MAX >> 1),
        }
    }

    /// The smallest and largest number the shape allows.
    pub fn bounds(&self) -> (f64, f64) {
        match self {
            Shape::Number { min, max } => (*min, *max),
            _ => (f64::MIN, f64::MAX),
        }
    }
}

/// A duration: a number and a unit.
pub(crate) static DURATION: Named = Named {
    name: "Duration",
    doc: "A duration: a number and a unit, `ms`, `s`, `m`, `h` or `d`, such as `500ms`, `30s`, `1.5h` or `7d`.",
    kind: Kind::Alias(Shape::Pattern(r"^[0-9]+(\.[0-9]+)?(ms|s|m|h|d)$")),
};

/// A task's or an agent's `cache`: on or off, or the settings of a cache that is on.
pub(crate) static CACHE_DEF: Named = Named {
    name: "Cache",
    doc: "Whether outputs stored by earlier runs are used instead of running again: `true`, `false`, or the\nsettings of a cache that is on.",
    kind: Kind::AnyOf(&[Shape::Bool, Shape::Named(&CACHE_MAP)]),
};

static CACHE_MAP: Named =
    Named { name: "CacheSettings", doc: "The settings of a cache that is on.", kind: Kind::Mapping(&CACHE) };

/// The fields of a `cache` mapping.
pub(crate) static CACHE: Section = Section::of(&[
    Field::new(
        "ttl",
        Shape::Named(&DURATION),
        "How long a stored output stays usable, such as `7d` (as long as it is kept when not given).",
    ),
    Field::new(
        "version",
        Shape::Named(&CACHE_VERSION),
        "A word that is part of the key: change it to make every stored output unusable.",
    ),
    Field::new(
        "destructive",
        Shape::Bool,
        "Whether outputs of an agent that may call destructive tools are stored too (not when not given).",
    ),
]);

static CACHE_VERSION: Named = Named {
    name: "CacheVersion",
    doc: "A cache version: a word or a number.",
    kind: Kind::AnyOf(&[Shape::Text, Shape::Integer { min: 0 }]),
};

/// A command as an argv.
pub(crate) static ARGV: Named = Named {
    name: "Argv",
    doc: "A command as an argv: the program and its arguments, never passed through a shell.",
    kind: Kind::Alias(Shape::NonEmptyList(&Shape::Text)),
};

/// A URL the runner calls: `http://` or `https://`.
pub(crate) const URL: Shape = Shape::Pattern("^https?://");
/// A list of strings.
pub(crate) const TEXTS: Shape = Shape::List(&Shape::Text);
/// A mapping of names to strings.
pub(crate) const TEXT_MAP: Shape = Shape::Map(&Shape::Text);
/// A generation setting's `max_tokens`.
pub(crate) const MAX_TOKENS: Shape = Shape::Count { min: 1 };
/// A generation setting's `temperature`.
pub(crate) const TEMPERATURE: Shape = Shape::Number { min: 0.0, max: 2.0 };
/// A generation setting's `seed`.
pub(crate) const SEED: Shape = Shape::Integer { min: 0 };

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    const SECTIONS: [&Section; 17] = [
        &ENVELOPE,
        &METADATA,
        &SPEC,
        &NESTED_PLAN,
        &MISSION_ANALYSIS,
        &PROVIDER,
        &TOOL,
        &AGENT,
        &MOCK_OUTCOME,
        &TASK,
        &PHASE,
        &VERIFICATION,
        &FAILURE,
        &ATTACHMENT,
        &CONTROL,
        &GATE,
        &GROUP,
    ];

    #[test]
    fn every_field_is_described_and_every_name_read_once_per_mapping() {
        for section in SECTIONS {
            let mut names = HashSet::new();
            for field in section.fields {
                assert!(!field.doc.is_empty(), "`{}` has no description", field.name);
                for name in std::iter::once(&field.name).chain(field.aliases) {
                    assert!(names.insert(*name), "`{name}` names two fields of one mapping");
                }
            }
        }
    }
}
