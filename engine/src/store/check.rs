//! What a run's log promises (docs/events.md), checked record by record as a log is read:
//! the same checks whichever store the records come from.

use super::StoreError;
use crate::event::{Event, Record, SCHEMA_VERSION};

/// The hint for a log that was edited or damaged.
pub(super) const DAMAGED: &str = "runner drops only a torn last line by itself; this log was changed by hand or damaged: \
                       restore it from a copy, or keep only the lines before this one to continue from there";

/// The hint for a log written by a newer runner.
pub(super) const NEWER: &str = "the log was probably written by a newer runner: read it with that version; this one \
                     cannot rebuild the run's state from it and will not guess";

/// Checks each record against what the log promises (docs/events.md): it starts with a
/// `RunCreated` of a known schema at `seq` 1, `seq` grows by one, and every record is of the
/// same run.
pub(super) struct Checker {
    /// Where the records come from, as messages name it.
    place: String,
    records: Vec<Record>,
}

impl Checker {
    /// A checker of the records read from `place` (a file, or a run's rows in a table).
    pub(super) fn new(place: String) -> Self {
        Checker { place, records: Vec::new() }
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
        let created = matches!(record.event, Event::RunCreated(_));
        match self.records.last() {
            None if record.seq != 1 => {
                return Err(self.corrupt(line, format!("the first record has seq {}, not 1", record.seq), DAMAGED));
            }
            None if !created => {
                let reason = format!("the first record is a `{}`, not the run's `RunCreated`", name(&record.event));
                return Err(self.corrupt(line, reason, DAMAGED));
            }
            None => {}
            Some(last) => {
                // Compared without adding, so no `seq` a damaged line holds can overflow.
                let reason = match record.seq {
                    seq if seq == last.seq => Some(format!("seq {seq} again: the record before is repeated")),
                    seq if seq < last.seq => Some(format!("seq {seq} after seq {}: out of order", last.seq)),
                    seq if seq - 1 == last.seq => None,
                    seq => Some(format!(
                        "seq {seq} after seq {}: records {} to {} are missing",
                        last.seq,
                        last.seq + 1,
                        seq - 1
                    )),
                };
                if let Some(reason) = reason {
                    return Err(self.corrupt(line, reason, DAMAGED));
                }
                if record.run_id != last.run_id {
                    let reason = format!("a record of run `{}` in the log of run `{}`", record.run_id, last.run_id);
                    return Err(self.corrupt(line, reason, DAMAGED));
                }
                if created {
                    return Err(self.corrupt(line, "a second `RunCreated`".into(), DAMAGED));
                }
            }
        }
        if let Event::RunCreated(created) = &record.event
            && !(1..=SCHEMA_VERSION).contains(&created.schema)
        {
            let reason =
                format!("event schema version {}; this runner reads versions 1 to {SCHEMA_VERSION}", created.schema);
            return Err(self.corrupt(line, reason, NEWER));
        }
        self.records.push(record);
        Ok(())
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

/// An event's type, as written in its `type` field.
fn name(event: &Event) -> String {
    serde_json::to_value(event)
        .ok()
        .and_then(|value| value.get("type").and_then(serde_json::Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
