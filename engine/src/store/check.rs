//! What a run's log promises (docs/events.md), checked record by record as a log is read:
//! the same checks whichever store the records come from.

use std::collections::HashSet;

use manifest::Text;

use super::StoreError;
use crate::event::{Event, Record, SCHEMA_VERSION};

/// The hint for a log that was edited or damaged.
pub(super) const DAMAGED: &str = "runner drops only a torn last line by itself; this log was changed by hand or damaged: \
                       restore it from a copy, or keep only the lines before this one to continue from there";

/// The hint for a log written by a newer runner.
pub(super) const NEWER: &str = "the log was probably written by a newer runner: read it with that version; this one \
                     cannot rebuild the run's state from it and will not guess";

/// Checks each record against what the log promises (docs/events.md): it starts with a
/// `RunCreated` of a known schema at `seq` 1, `seq` grows by one, every record is of the same
/// run, names only tasks of the run's plans, and none follows the run's end.
pub(super) struct Checker {
    /// Where the records come from, as messages name it.
    place: String,
    records: Vec<Record>,
    /// The ids of the tasks of the run's plan, of every recorded replan's and of the items of
    /// every recorded map.
    tasks: HashSet<Text>,
    /// The ids of the map tasks among them.
    maps: HashSet<Text>,
    /// The record that ended the run, once one has: its `seq` and its type.
    ended: Option<(u64, &'static str)>,
}

impl Checker {
    /// A checker of the records read from `place` (a file, or a run's rows in a table).
    pub(super) fn new(place: String) -> Self {
        Checker { place, records: Vec::new(), tasks: HashSet::new(), maps: HashSet::new(), ended: None }
    }

    /// Whether no record was accepted.
    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The records accepted so far, in order.
    pub(super) fn into_records(self) -> Vec<Record> {
        self.records
    }

    /// A `store::corrupt` error at `line` (a 1-based line or row).
    pub(super) fn corrupt(&self, line: usize, reason: String, hint: &'static str) -> StoreError {
        StoreError::Corrupt { path: self.place.clone(), line, reason, hint }
    }

    /// Checks one more record and keeps it.
    pub(super) fn accept(&mut self, record: Record, line: usize) -> Result<(), StoreError> {
        if let Some(reason) = self.out_of_place(&record).or_else(|| self.contradiction(&record.event)) {
            return Err(self.corrupt(line, reason, DAMAGED));
        }
        if let Event::RunCreated(created) = &record.event
            && !(1..=SCHEMA_VERSION).contains(&created.schema)
        {
            let reason =
                format!("event schema version {}; this runner reads versions 1 to {SCHEMA_VERSION}", created.schema);
            return Err(self.corrupt(line, reason, NEWER));
        }
        self.learn(&record);
        self.records.push(record);
        Ok(())
    }

    /// Why a record is not where it belongs, if it is not: the first must be the `RunCreated`
    /// at `seq` 1, each next one of the same run at the next `seq`.
    fn out_of_place(&self, record: &Record) -> Option<String> {
        let created = matches!(record.event, Event::RunCreated(_));
        let Some(last) = self.records.last() else {
            return match record.seq {
                1 if created => None,
                1 => Some(format!("the first record is a `{}`, not the run's `RunCreated`", record.event.name())),
                seq => Some(format!("the first record has seq {seq}, not 1")),
            };
        };
        // Compared without adding, so no `seq` a damaged line holds can overflow.
        match record.seq {
            seq if seq == last.seq => Some(format!("seq {seq} again: the record before is repeated")),
            seq if seq < last.seq => Some(format!("seq {seq} after seq {}: out of order", last.seq)),
            seq if seq - 1 != last.seq => {
                Some(format!("seq {seq} after seq {}: records {} to {} are missing", last.seq, last.seq + 1, seq - 1))
            }
            _ if record.run_id != last.run_id => {
                Some(format!("a record of run `{}` in the log of run `{}`", record.run_id, last.run_id))
            }
            _ if created => Some("a second `RunCreated`".into()),
            _ => None,
        }
    }

    /// Why an event contradicts the records before it, if it does: it follows the run's end
    /// (the state machine records nothing after a `RunCompleted` or `RunCancelled`), or it
    /// names a task that neither the run's plan, a recorded replan, a planned task nor a map's
    /// items have.
    fn contradiction(&self, event: &Event) -> Option<String> {
        if let Some((seq, end)) = self.ended {
            return Some(match event.name() {
                name if name == end => format!("a second `{end}`: the run ended with the one at seq {seq}"),
                name => format!("a `{name}` after the run's `{end}` at seq {seq}: nothing follows a run's end"),
            });
        }
        // A planner's line brings its task in, or names one that never joined.
        if matches!(event, Event::TaskPlanned(_) | Event::LineRejected { .. }) {
            return None;
        }
        let task = event.task()?;
        // A retried run takes items over before their map expands again.
        let reused_item = matches!(event, Event::TaskReused { .. })
            && manifest::template::map_of_item(task).is_some_and(|map| self.maps.contains(map.as_bytes()));
        (!self.tasks.contains(task.as_bytes()) && !reused_item)
            .then(|| format!("task `{task}` is in neither the run's plan, a recorded replan nor a recorded map"))
    }

    /// Takes in what an accepted record tells about the ones after it: the tasks of the plan
    /// it carries, or that the run ended.
    fn learn(&mut self, record: &Record) {
        if let Some(plan) = record.event.plan() {
            self.tasks.reserve(plan.tasks.len());
            self.tasks.extend(plan.tasks.iter().map(|task| task.id.value.clone()));
            let maps = plan.tasks.iter().filter(|task| task.extras().for_each.is_some());
            self.maps.extend(maps.map(|task| task.id.value.clone()));
        }
        if let Event::TaskPlanned(planned) = &record.event {
            let task = &planned.task;
            self.tasks.insert(task.id.value.clone());
            if task.extras().for_each.is_some() {
                self.maps.insert(task.id.value.clone());
            }
        }
        if let Event::MapExpanded { task, items } = &record.event {
            self.tasks.extend((0..items.len()).map(|index| Text::from(manifest::template::item_id(task, index))));
        }
        if let Event::RunCompleted { .. } | Event::RunCancelled { .. } = record.event {
            self.ended = Some((record.seq, record.event.name()));
        }
    }

    /// Says why a line of JSON is not a record: not an object, an unknown event type, or a
    /// known one with a missing or wrong field.
    pub(super) fn not_a_record(&self, value: &serde_json::Value, error: &serde_json::Error, line: usize) -> StoreError {
        let Some(object) = value.as_object() else {
            let text: String = value.to_string().chars().take(40).collect();
            return self.corrupt(line, format!("not an event record: `{text}`"), DAMAGED);
        };
        let Some(kind) = object.get("type").and_then(serde_json::Value::as_str) else {
            return self.corrupt(line, format!("not an event record ({error})"), DAMAGED);
        };
        // Only an unknown type fails on the tag alone; a known one then misses its fields.
        let probe = serde_json::json!({ "type": kind });
        match serde_json::from_value::<Event>(probe) {
            Err(probe) if probe.to_string().starts_with("unknown variant") => {
                self.corrupt(line, format!("unknown event type `{kind}`"), NEWER)
            }
            _ => self.corrupt(line, format!("not a valid `{kind}` record ({error})"), DAMAGED),
        }
    }
}
