//! [`PrefixStates`]: SHA-256 states kept after repeating leading parts.

use sha2::{Digest, Sha256};

use super::sha256;

/// SHA-256 states after block-aligned prefixes of earlier inputs, so that
/// hashing an input whose leading part repeats (a body digest list: the
/// retained history is the same build after build, and grows at its end)
/// costs a comparison of that part plus hashing the rest. The result is
/// exactly `sha256(data)`: a state is used only after its whole prefix
/// compared equal. Bounded: at most `max_bytes` of stored prefixes.
pub struct PrefixStates {
    /// Keyed by the input's first eight bytes (a digest: well spread);
    /// a few entries per key, most recently used first.
    buckets: std::collections::HashMap<u64, Vec<PrefixState>>,
    bytes: usize,
    max_bytes: usize,
}

struct PrefixState {
    prefix: Vec<u8>,
    state: Sha256,
}

/// Entries kept per key (inputs sharing their first eight bytes).
const PER_KEY: usize = 4;
/// Leading parts shorter than this are simply hashed.
const MIN_PREFIX: usize = 1024;
const BLOCK: usize = 64;

impl PrefixStates {
    pub fn new(max_bytes: usize) -> Self {
        PrefixStates {
            buckets: std::collections::HashMap::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// Bytes of prefixes held.
    pub fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// `sha256(data)`, where `data[..stable]` is the part expected to repeat.
    pub fn sha256(&mut self, data: &[u8], stable: usize) -> [u8; 32] {
        let cut = stable.min(data.len()) / BLOCK * BLOCK;
        if cut < MIN_PREFIX || cut > self.max_bytes {
            return sha256(data);
        }
        let mut head = [0u8; 8];
        head.copy_from_slice(&data[..8]);
        let key = u64::from_le_bytes(head);
        let bucket = self.buckets.entry(key).or_default();
        // The longest stored prefix of this input.
        let found = bucket
            .iter()
            .enumerate()
            .filter(|(_, e)| e.prefix.len() <= cut && data[..e.prefix.len()] == e.prefix[..])
            .max_by_key(|(_, e)| e.prefix.len())
            .map(|(i, _)| i);
        let mut h = match found {
            Some(i) => {
                let e = bucket.remove(i);
                let mut h = e.state.clone();
                h.update(&data[e.prefix.len()..cut]);
                if e.prefix.len() == cut {
                    bucket.insert(0, e);
                } else {
                    // Grown: the entry moves on to the longer prefix.
                    self.bytes -= e.prefix.len();
                    let mut prefix = e.prefix;
                    prefix.extend_from_slice(&data[prefix.len()..cut]);
                    self.bytes += cut;
                    bucket.insert(
                        0,
                        PrefixState {
                            prefix,
                            state: h.clone(),
                        },
                    );
                }
                h
            }
            None => {
                let mut h = Sha256::new();
                h.update(&data[..cut]);
                if bucket.len() >= PER_KEY {
                    if let Some(old) = bucket.pop() {
                        self.bytes -= old.prefix.len();
                    }
                }
                bucket.insert(
                    0,
                    PrefixState {
                        prefix: data[..cut].to_vec(),
                        state: h.clone(),
                    },
                );
                self.bytes += cut;
                h
            }
        };
        if self.bytes > self.max_bytes {
            // Over the bound: start over (rare; the working set refills it).
            self.buckets.clear();
            self.bytes = 0;
        }
        h.update(&data[cut..]);
        h.finalize().into()
    }
}
