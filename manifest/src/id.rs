//! Task and agent ids as a plan holds them: shared text, read once per distinct id.
//!
//! A plan of 100,000 tasks names a task, its agent and each of its dependencies by id; as
//! `String`s those were half a million allocations of a few bytes, each taking a 32-byte block
//! of the allocator, written among the parse tree's nodes so that freeing the tree left holes
//! nothing else could fill. The loader gives every mention of an id the text of its first one.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An id: its text, shared by every copy. Reads as a `&str` (`Deref`), compares, hashes and
/// serialises as one.
#[derive(Clone)]
pub struct Id(Arc<str>);

// Two words, where the `String` it replaces took three.
const _: () = assert!(std::mem::size_of::<Id>() == 16);

impl Id {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Id {
    fn default() -> Self {
        Id::from("")
    }
}

impl From<&str> for Id {
    fn from(text: &str) -> Self {
        Id(Arc::from(text))
    }
}

impl From<&String> for Id {
    fn from(text: &String) -> Self {
        Id::from(text.as_str())
    }
}

impl From<String> for Id {
    fn from(text: String) -> Self {
        Id(Arc::from(text))
    }
}

impl From<Id> for String {
    fn from(id: Id) -> Self {
        id.as_str().to_owned()
    }
}

impl Deref for Id {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Id {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Id {}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Id> for str {
    fn eq(&self, other: &Id) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Id> for &str {
    fn eq(&self, other: &Id) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Id> for String {
    fn eq(&self, other: &Id) -> bool {
        self == other.as_str()
    }
}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Id {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Id {
    /// Hashes as the `str` it holds, as `Borrow<str>` requires.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Id::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back_as_written() {
        for text in ["", "t1", "é".repeat(40).as_str()] {
            let id = Id::from(text);
            assert_eq!(id.as_str(), text);
            assert_eq!(String::from(id.clone()), text);
            assert_eq!(serde_json::to_string(&id).ok(), serde_json::to_string(text).ok());
        }
    }

    #[test]
    fn ids_compare_and_hash_as_their_text() {
        use std::collections::HashSet;
        let long = "x".repeat(30);
        let ids: HashSet<Id> = ["b", "a", long.as_str()].into_iter().map(Id::from).collect();
        assert!(ids.contains("a") && ids.contains(long.as_str()) && !ids.contains("c"));
        let mut sorted: Vec<Id> = ids.into_iter().collect();
        sorted.sort();
        assert_eq!(sorted, ["a", "b", long.as_str()]);
        assert_eq!(Id::from(String::from("t1")), "t1");
    }
}
