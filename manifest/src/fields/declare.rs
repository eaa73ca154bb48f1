//! [`declare_task!`]: a task's fields declared once, with the field table, the plan's types and
//! the plan's JSON form built from the one declaration.
//!
//! Each field is declared with where it lives (`core`: a field of `Task`; `extras`: behind the
//! task's one box), its Rust name, type and doc, how its default is left out of the JSON, its
//! manifest [`Field`](super::Field) (name, aliases, doc, shape), and an example the round-trip
//! test loads. What stays hand-written is the reader in `normalize/tasks.rs`, which reports
//! located problems and reads the lenient bare form; the test in `fields/round_trip.rs` loads
//! every declared field's example and fails for a field the reader forgot.

use crate::plan::At;

/// A field that is always written: never left out of the JSON.
pub(crate) fn kept<T>(_: &T) -> bool {
    false
}

/// Whether a field holds its type's default, so the JSON leaves it out.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Whether a located value holds its type's default (its location aside), so the JSON leaves it
/// out.
pub(crate) fn value_is_default<T: Default + PartialEq>(value: &At<T>) -> bool {
    value.value == T::default()
}

/// The value of a field of the extras that no task sets, as a constant (the extras of a task
/// that sets none are a `static`).
pub(crate) trait Unset {
    /// The value when not set.
    const UNSET: Self;
}

impl<T> Unset for Option<T> {
    const UNSET: Self = None;
}

impl<T> Unset for Vec<T> {
    const UNSET: Self = Vec::new();
}

impl<K, V> Unset for std::collections::BTreeMap<K, V> {
    const UNSET: Self = std::collections::BTreeMap::new();
}

/// A declared field's example, for the round-trip test: the manifest field it sets (none for a
/// field only the plan has), the key the plan's JSON writes it under, and the example itself
/// (a JSON object: entries put over those of a task or agent of the test's manifest, a null
/// removing one; for a plan-only field, entries of the task's JSON).
#[cfg(test)]
pub(crate) struct Example {
    /// The manifest field's canonical name.
    pub name: Option<&'static str>,
    /// The key of the task's JSON that holds what the field sets.
    pub key: &'static str,
    /// The example, as JSON.
    pub json: &'static str,
}

/// Declares a task's fields once: from one list come the manifest's field table (a
/// [`Section`](super::Section)), the task type with its core fields, the boxed extras and their
/// unset value, the task's JSON form (each field in declaration order under its Rust name, left
/// out when its `left out if` test holds; read back with every field but the `required` ones
/// optional), and the examples the round-trip test loads.
///
/// Each entry is one of:
///
/// - `core|extras NAME: TYPE => required|left out if PREDICATE, field FIELD, example "JSON";`
/// - `core|extras NAME: TYPE => left out if PREDICATE, plan only, example "JSON";` (a field the
///   loader fills in that no manifest writes; its example is the task's JSON)
/// - `bare NAME => PLAN_FIELD, field FIELD, example "JSON";` (a manifest field that sets a
///   field declared elsewhere, such as `max_retries` the failure policy)
///
/// An `extras` field's type has an unset value ([`Unset`]: an `Option` or a `Vec`). The task
/// type's hand-written `extras()` and `set_extras()` reach the box.
macro_rules! declare_task {
    (
        $(#[$task_meta:meta])*
        pub struct $task:ident { $($fixed:tt)* }

        $(#[$extras_meta:meta])*
        pub struct $extras:ident;

        $(#[$none_meta:meta])*
        static $none:ident;

        $(#[$section_meta:meta])*
        static $section:ident, examples $examples:ident;

        fields { $($body:tt)* }
    ) => {
        $crate::fields::declare_task!(@munch
            {
                [$(#[$task_meta])* $task { $($fixed)* }]
                [$(#[$extras_meta])* $extras]
                [$(#[$none_meta])* $none]
                [$(#[$section_meta])* $section $examples]
            }
            core [] extras [] section [] json [] examples []
            $($body)*
        );
    };

    // A field of the plan and the manifest, always in the JSON.
    (@munch $header:tt
        core [$($core:tt)*] extras [$($extras:tt)*] section [$($section:tt)*] json [$($json:tt)*]
        examples [$($examples:tt)*]
        $(#[doc = $doc:literal])*
        $place:ident $name:ident: $ty:ty => required,
        field $field:expr,
        example $example:literal;
        $($rest:tt)*
    ) => {
        $crate::fields::declare_task!(@place $place $header
            core [$($core)*] extras [$($extras)*]
            field [$(#[doc = $doc])* $name: $ty]
            section [$($section)* $field,]
            json [$($json)* ($place $name: $ty, $crate::fields::declare::kept, [])]
            examples [$($examples)* (Some($field.name), stringify!($name), $example)]
            $($rest)*
        );
    };

    // A field of the plan and the manifest, left out of the JSON at its default.
    (@munch $header:tt
        core [$($core:tt)*] extras [$($extras:tt)*] section [$($section:tt)*] json [$($json:tt)*]
        examples [$($examples:tt)*]
        $(#[doc = $doc:literal])*
        $place:ident $name:ident: $ty:ty => left out if $omit:path,
        field $field:expr,
        example $example:literal;
        $($rest:tt)*
    ) => {
        $crate::fields::declare_task!(@place $place $header
            core [$($core)*] extras [$($extras)*]
            field [$(#[doc = $doc])* $name: $ty]
            section [$($section)* $field,]
            json [$($json)* ($place $name: $ty, $omit, [#[serde(default)]])]
            examples [$($examples)* (Some($field.name), stringify!($name), $example)]
            $($rest)*
        );
    };

    // A field only the plan has.
    (@munch $header:tt
        core [$($core:tt)*] extras [$($extras:tt)*] section [$($section:tt)*] json [$($json:tt)*]
        examples [$($examples:tt)*]
        $(#[doc = $doc:literal])*
        $place:ident $name:ident: $ty:ty => left out if $omit:path,
        plan only,
        example $example:literal;
        $($rest:tt)*
    ) => {
        $crate::fields::declare_task!(@place $place $header
            core [$($core)*] extras [$($extras)*]
            field [$(#[doc = $doc])* $name: $ty]
            section [$($section)*]
            json [$($json)* ($place $name: $ty, $omit, [#[serde(default)]])]
            examples [$($examples)* (None, stringify!($name), $example)]
            $($rest)*
        );
    };

    // A field only the manifest has, which sets a field declared elsewhere.
    (@munch $header:tt
        core [$($core:tt)*] extras [$($extras:tt)*] section [$($section:tt)*] json [$($json:tt)*]
        examples [$($examples:tt)*]
        bare $name:ident => $target:ident,
        field $field:expr,
        example $example:literal;
        $($rest:tt)*
    ) => {
        $crate::fields::declare_task!(@munch $header
            core [$($core)*] extras [$($extras)*]
            section [$($section)* $field,]
            json [$($json)*]
            examples [$($examples)* (Some($field.name), stringify!($target), $example)]
            $($rest)*
        );
    };

    // Every field declared: the items.
    (@munch {
            [$(#[$task_meta:meta])* $task:ident { $($fixed:tt)* }]
            [$(#[$extras_meta:meta])* $extras:ident]
            [$(#[$none_meta:meta])* $none:ident]
            [$(#[$section_meta:meta])* $section:ident $examples:ident]
        }
        core [$($(#[doc = $cdoc:literal])* $cname:ident: $cty:ty;)*]
        extras [$($(#[doc = $edoc:literal])* $ename:ident: $ety:ty;)*]
        section [$($field:expr,)*]
        json [$(($place:ident $jname:ident: $jty:ty, $omit:path, [$($attr:tt)*]))*]
        examples [$(($ex_name:expr, $ex_key:expr, $ex_json:literal))*]
    ) => {
        $(#[$task_meta])*
        pub struct $task {
            $($(#[doc = $cdoc])* pub $cname: $cty,)*
            $($fixed)*
        }

        $(#[$extras_meta])*
        pub struct $extras {
            $($(#[doc = $edoc])* pub $ename: $ety,)*
        }

        $(#[$none_meta])*
        static $none: $extras = $extras {
            $($ename: <$ety as $crate::fields::declare::Unset>::UNSET,)*
        };

        $(#[$section_meta])*
        pub(crate) static $section: $crate::fields::Section = $crate::fields::Section::of(&[$($field,)*]);

        /// Every declared field's example, in declaration order.
        #[cfg(test)]
        pub(crate) static $examples: &[$crate::fields::declare::Example] = &[
            $($crate::fields::declare::Example { name: $ex_name, key: $ex_key, json: $ex_json },)*
        ];

        impl ::serde::Serialize for $task {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeStruct as _;
                let task = self;
                let extras = self.extras();
                let len = 0 $(+ usize::from(!$omit(&$crate::fields::declare_task!(@at $place task extras).$jname)))*;
                let mut state = serializer.serialize_struct("Task", len)?;
                $(
                    let value = &$crate::fields::declare_task!(@at $place task extras).$jname;
                    if $omit(value) {
                        state.skip_field(stringify!($jname))?;
                    } else {
                        state.serialize_field(stringify!($jname), value)?;
                    }
                )*
                state.end()
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $task {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                /// A task as it is read: every field but the required ones may be left out.
                #[derive(::serde::Deserialize)]
                #[serde(rename = "Task")]
                struct Stored {
                    $($($attr)* $jname: $jty,)*
                }
                let stored = Stored::deserialize(deserializer)?;
                let mut task = $task { $($cname: stored.$cname,)* ..$task::default() };
                task.set_extras($extras { $($ename: stored.$ename,)* });
                Ok(task)
            }
        }
    };

    (@place core $header:tt core [$($core:tt)*] extras [$($extras:tt)*] field [$($field:tt)*] $($rest:tt)*) => {
        $crate::fields::declare_task!(@munch $header core [$($core)* $($field)*;] extras [$($extras)*] $($rest)*);
    };
    (@place extras $header:tt core [$($core:tt)*] extras [$($extras:tt)*] field [$($field:tt)*] $($rest:tt)*) => {
        $crate::fields::declare_task!(@munch $header core [$($core)*] extras [$($extras)* $($field)*;] $($rest)*);
    };

    (@at core $task:ident $extras:ident) => { $task };
    (@at extras $task:ident $extras:ident) => { $extras };
}

pub(crate) use declare_task;

/// Declares a mapping's field table with an example for each field, for a mapping whose plan
/// type is written by hand (an agent's fields become a `Runtime` variant): the examples are
/// JSON entries of the mapping, and the round-trip test loads each one.
macro_rules! declare_section {
    (
        $(#[$meta:meta])*
        static $section:ident, examples $examples:ident = [$($field:expr => example $example:literal,)*];
    ) => {
        $(#[$meta])*
        pub(crate) static $section: $crate::fields::Section = $crate::fields::Section::of(&[$($field,)*]);

        /// Every field's example, in the table's order.
        #[cfg(test)]
        pub(crate) static $examples: &[$crate::fields::declare::Example] = &[
            $($crate::fields::declare::Example { name: Some($field.name), key: $field.name, json: $example },)*
        ];
    };
}

pub(crate) use declare_section;
