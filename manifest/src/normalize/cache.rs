//! `cache` of a task or an agent: a boolean, or a mapping of the settings of a cache that is on.

use crate::fields::CACHE;
use crate::node_path::NodePath;
use crate::plan::{At, Cache};
use crate::read::{Entry, Reader};
use crate::source::Loc;
use crate::tree::Value;

/// Reads `cache: true | false | {ttl, version, destructive}`.
pub(crate) fn read_cache(reader: &mut Reader, entry: Entry<'_>, path: &NodePath) -> Option<At<Cache>> {
    let loc = Loc::new(entry.value.span(), path);
    match &entry.value.value {
        Value::Bool(enabled) => Some(At::new(Cache { enabled: *enabled, ..Cache::default() }, loc)),
        Value::Map(_) => {
            let fields = reader.fields(entry.value, path, "`cache`", CACHE.fields, &[])?;
            let cache = Cache {
                enabled: true,
                ttl: reader.duration_of(&fields, "ttl"),
                version: reader.text_of::<String>(&fields, "version").map(|v| v.value),
                destructive: reader.boolean_of(&fields, "destructive").unwrap_or(false),
            };
            Some(At::new(cache, loc))
        }
        _ => {
            reader.wrong_type(entry.value, path, "`cache`", "`true`, `false` or a mapping such as `{ttl: 7d}`");
            None
        }
    }
}
