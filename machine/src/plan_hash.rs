//! The hash `RunCreated` records of its plan: the SHA-256 of the plan's JSON, in hex, computed
//! when it is first read. Encoding a large plan to hash it is the biggest part of starting a
//! run, and a run kept in memory never reads it; a log's writer computes it as it encodes the
//! record. Either way the value is the same function of the plan, so the state machine stays
//! deterministic.

use std::fmt;
use std::sync::{Arc, OnceLock};

use manifest::Plan;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// The SHA-256 of a plan's JSON, lower-case hex: given (read from a log) or computed from the
/// plan on first use. Clones share the computed value.
#[derive(Clone)]
pub struct PlanHash {
    /// The plan it is computed from; `None` when the hex was given.
    plan: Option<Arc<Plan>>,
    hex: Arc<OnceLock<String>>,
}

impl PlanHash {
    /// The hash of `plan`, computed when first read.
    pub fn of(plan: Arc<Plan>) -> Self {
        PlanHash { plan: Some(plan), hex: Arc::new(OnceLock::new()) }
    }

    /// The hash as hex, computing it on first use.
    pub fn as_str(&self) -> &str {
        self.hex.get_or_init(|| self.plan.as_deref().map_or_else(String::new, plan_sha256))
    }
}

impl From<String> for PlanHash {
    /// A hash given as hex (as a log records it).
    fn from(hex: String) -> Self {
        PlanHash { plan: None, hex: Arc::new(OnceLock::from(hex)) }
    }
}

impl PartialEq for PlanHash {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Debug for PlanHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PlanHash").field(&self.as_str()).finish()
    }
}

impl Serialize for PlanHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PlanHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(PlanHash::from)
    }
}

/// The SHA-256 of the plan's JSON, in hex. Hashed as it is encoded, so a large plan's JSON is
/// never held in memory; not generic, so the encoder and the hasher are compiled together here
/// rather than in each crate that uses a `RunState`.
fn plan_sha256(plan: &Plan) -> String {
    let mut hasher = HashWriter { hasher: Sha256::new(), buffer: Vec::with_capacity(HashWriter::CHUNK) };
    let _ = serde_json::to_writer(&mut hasher, plan);
    hasher.finish().iter().map(|b| format!("{b:02x}")).collect()
}

/// Feeds what is written to it into a hasher, in chunks: the encoder writes a few bytes at a
/// time, and each call into the hasher costs more than copying them.
struct HashWriter {
    hasher: Sha256,
    buffer: Vec<u8>,
}

impl HashWriter {
    /// How many bytes are gathered before they are hashed.
    const CHUNK: usize = 64 * 1024;

    /// The digest of everything written.
    fn finish(mut self) -> [u8; 32] {
        self.hasher.update(&self.buffer);
        self.hasher.finalize().into()
    }

    /// Hashes what is gathered, then `bytes` (gathered too when they are short).
    fn spill(&mut self, bytes: &[u8]) {
        self.hasher.update(&self.buffer);
        self.buffer.clear();
        if bytes.len() >= Self::CHUNK {
            self.hasher.update(bytes);
        } else {
            self.buffer.extend_from_slice(bytes);
        }
    }
}

impl std::io::Write for HashWriter {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.len() <= Self::CHUNK - self.buffer.len() {
            self.buffer.extend_from_slice(bytes);
        } else {
            self.spill(bytes);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_computed_hash_is_the_sha256_of_the_plans_json() {
        let plan = Arc::new(Plan::default());
        let json = serde_json::to_vec(&*plan).expect("a plan encodes");
        let expected: String = Sha256::digest(&json).iter().map(|b| format!("{b:02x}")).collect();
        let hash = PlanHash::of(Arc::clone(&plan));
        assert_eq!(hash.as_str(), expected);
        assert_eq!(hash, PlanHash::from(expected.clone()));
        assert_eq!(serde_json::to_value(&hash).expect("a hash encodes"), serde_json::Value::String(expected));
    }
}
