//! Output-format coupling: a template reads `tasks.A.output.F`, but nothing guarantees A's
//! output has `F`. Only a `schema_check` whose schema declares `F` in `properties` and lists it
//! in `required` is a guarantee. Linear in the number of reads.

use crate::plan::Verification;

use super::found::{Found, index};
use super::{Facts, Finding, Lint};

pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    for (i, reads) in facts.reads.iter().enumerate() {
        for (r, (producer, read)) in reads.iter().enumerate() {
            let Some(field) = &read.field else { continue };
            if guarantees(facts.plan.tasks[*producer].extras().verification.as_ref(), field) {
                continue;
            }
            found.push(Found::OutputFormatCoupling { task: index(i), read: index(r) });
        }
    }
}

/// The finding on read `r` of task `i` (of [`Facts::reads`]).
pub(super) fn finding(facts: &Facts<'_>, i: usize, r: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let (producer, read) = facts.reads[i][r];
    let producer = &facts.plan.tasks[producer];
    let field = read.field.as_deref().unwrap_or_default();
    let lint = Lint::OutputFormatCoupling {
        task: task.id.value.to_string(),
        producer: producer.id.value.to_string(),
        field: field.to_owned(),
    };
    Finding::warning(lint, Some(&task.id.value), &read.loc)
        .label(format!("assumes `{}` outputs JSON with `{field}`", producer.id.value))
        .help(format!(
            "give `{}` `verification: {{type: schema_check, schema: {{type: object, required: [{field}], properties: {{{field}: {{}}}}}}}}`",
            producer.id.value
        ))
}

/// Whether a verification's schema declares `field` and requires it.
pub(crate) fn guarantees(verification: Option<&Verification>, field: &str) -> bool {
    let Some(Verification::SchemaCheck { schema }) = verification else { return false };
    let schema = &schema.value;
    let declared = schema.get("properties").and_then(|p| p.get(field)).is_some();
    let required = schema
        .get("required")
        .and_then(|r| r.as_array())
        .is_some_and(|required| required.iter().any(|r| r.as_str() == Some(field)));
    declared && required
}
