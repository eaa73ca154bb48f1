//! Maps (tasks with `for_each`): how many items each may have, which templates take a map's
//! whole output (every item's output, as a list), and the readers other than synthesis gates
//! that do. Linear in reads plus the length of the templates that read a map.

use crate::plan::{ForEach, Task, TaskKind};
use crate::template::OutputOf;

use super::expressions::in_expression;
use super::found::{Found, index};
use super::{Facts, Finding, Lint};

/// The most items a map task may have: its list's length, or `max_items` for an expression;
/// `None` for an expression nothing caps, and for a task that is not a map.
pub(crate) fn max_items(task: &Task) -> Option<u64> {
    match &task.extras().for_each.as_ref()?.value {
        ForEach::List(items) => Some(items.len() as u64),
        ForEach::Expr(_) => task.extras().max_items.as_ref().map(|max| u64::from(max.value)),
    }
}

/// How many times a task runs: once per item for a map (once when nothing caps its items, as
/// the critic cannot know how many there will be), else once.
pub(crate) fn runs(task: &Task) -> u64 {
    match task.extras().for_each {
        Some(_) => max_items(task).unwrap_or(1),
        None => 1,
    }
}

/// How many outputs of task `j` the input of task `i` takes: every item's when `j` is a map
/// that `i` reads whole, else one.
pub(crate) fn outputs_taken(facts: &Facts<'_>, i: usize, j: usize) -> u64 {
    let upstream = &facts.plan.tasks[j];
    if upstream.extras().for_each.is_some() && reads_whole(&facts.plan.tasks[i], &upstream.id.value) {
        runs(upstream)
    } else {
        1
    }
}

/// Whether a task's input (or a review's prompt) takes the whole output of task `map`: it
/// writes `tasks.MAP.output` other than to take one part of it (see [`takes_one`]).
pub(crate) fn reads_whole(reader: &Task, map: &str) -> bool {
    [reader.input.as_ref(), reader.extras().prompt.as_ref()]
        .into_iter()
        .flatten()
        .any(|text| whole_in(&text.value, map))
}

fn whole_in(text: &str, map: &str) -> bool {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find("tasks.").map(|k| from + k) {
        from = at + "tasks.".len();
        if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b'.') {
            continue;
        }
        let Some(rest) = text[from..].strip_prefix(map).and_then(|rest| rest.strip_prefix(".output")) else { continue };
        if !rest.bytes().next().is_some_and(is_ident) && !takes_one(rest) {
            return true;
        }
    }
    false
}

/// Whether what follows `tasks.MAP.output` takes one part of it: an item (`[0]`, `.0`), a
/// field, or the `first`, `last`, `length` or `count` filter.
fn takes_one(rest: &str) -> bool {
    let rest = rest.trim_start();
    if rest.starts_with('[') || rest.starts_with('.') {
        return true;
    }
    let Some(filter) = rest.strip_prefix('|') else { return false };
    let filter = filter.trim_start();
    let name = &filter[..filter.bytes().position(|b| !is_ident(b)).unwrap_or(filter.len())];
    matches!(name, "first" | "last" | "length" | "count")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let tasks = &facts.plan.tasks;
    for (i, reads) in facts.reads.iter().enumerate() {
        if tasks[i].kind == TaskKind::SynthesisGate {
            continue;
        }
        // The first read of each map in the input: where the finding points.
        let in_input = |r: usize| !in_expression(&tasks[i], reads[r].1);
        for (r, (map, _)) in reads.iter().enumerate() {
            if tasks[*map].extras().for_each.is_none() || !in_input(r) {
                continue;
            }
            let first = (0..r).all(|earlier| reads[earlier].0 != *map || !in_input(earlier));
            if first && reads_whole(&tasks[i], &tasks[*map].id.value) {
                found.push(Found::MapWithoutSynthesis { task: index(i), read: index(r) });
            }
        }
    }
}

/// The warning on read `r` of task `i` (of [`Facts::reads`]), which takes a whole map's output.
pub(super) fn map_without_synthesis(facts: &Facts<'_>, i: usize, r: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    let (map, read) = facts.reads[i][r];
    let map = &facts.plan.tasks[map];
    let name = map.id.value.as_str();
    let lint = Lint::MapWithoutSynthesis { task: id.into(), map: name.into(), items: max_items(map) };
    Finding::warning(lint, Some(id), &read.loc).label(format!("every item's output of `{name}`")).help(format!(
        "add a task with `type: synthesis_gate`, `inputs: [{name}]` and `max_output_tokens`, and read its output here; or take one item, `{{{{ {}[0] }}}}`",
        OutputOf(name)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_output_is_one_not_cut_down_to_a_part() {
        for text in [
            "{{ tasks.pages.output }}",
            "Summarise {{tasks.pages.output}} now",
            "{% for page in tasks.pages.output %}{{ page }}{% endfor %}",
            "{{ tasks.pages.output | join(', ') }}",
            "{{ tasks.pages.output[0] }} and {{ tasks.pages.output | tojson }}",
        ] {
            assert!(whole_in(text, "pages"), "{text}");
        }
        for text in [
            "{{ tasks.pages.output[0] }}",
            "{{ tasks.pages.output.0 }}",
            "{{ tasks.pages.output[i].title }}",
            "{{ tasks.pages.output | length }} pages",
            "{{ tasks.pages.output|first }}",
            "{{ tasks.pages.outputs }}",
            "{{ tasks.pages2.output }}",
            "{{ tasks.other.output }}",
            "{{ mytasks.pages.output }}",
            "{{ tasks.pages.status }}",
        ] {
            assert!(!whole_in(text, "pages"), "{text}");
        }
    }
}
