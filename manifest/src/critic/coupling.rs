//! Output-format coupling: a template reads `tasks.A.output.F`, but nothing guarantees A's
//! output has `F`. Only a `schema_check` whose schema declares `F` in `properties` and lists it
//! in `required` is a guarantee. Linear in the number of reads.

use crate::plan::Verification;

use super::{Facts, Finding, Lint};

pub(super) fn check(facts: &Facts<'_>, findings: &mut Vec<Finding>) {
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        for (producer, read) in &facts.reads[i] {
            let Some(field) = &read.field else { continue };
            let producer = &facts.plan.tasks[*producer];
            if guarantees(producer.verification.as_ref(), field) {
                continue;
            }
            let lint = Lint::OutputFormatCoupling {
                task: task.id.value.clone(),
                producer: producer.id.value.clone(),
                field: field.clone(),
            };
            findings.push(
                Finding::warning(lint, Some(&task.id.value), &read.loc)
                    .label(format!("assumes `{}` outputs JSON with `{field}`", producer.id.value))
                    .help(format!(
                        "give `{}` `verification: {{type: schema_check, schema: {{type: object, required: [{field}], properties: {{{field}: {{}}}}}}}}`",
                        producer.id.value
                    )),
            );
        }
    }
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
