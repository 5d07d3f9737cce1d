//! Short strings that recur across a batch of decoded items (member names,
//! tool names, principals, providers, media types), each made once by the
//! host: a small table indexed by a hash of the text, a slot keeping the last
//! value made for a text that hashes to it.

/// Table size (a power of two).
const SLOTS: usize = 256;
/// Texts longer than this are not kept (a text, not a name).
const MAX_LEN: usize = 32;

/// The host's value (a string object) for each recent short text.
pub struct Names<T> {
    slots: Vec<Option<(Box<str>, T)>>,
}

impl<T: Clone> Default for Names<T> {
    fn default() -> Self {
        Names {
            slots: vec![None; SLOTS],
        }
    }
}

impl<T: Clone> Names<T> {
    /// The value for `text`: the one kept for it, else `make(text)` (kept
    /// when the text is short, replacing whatever its slot held).
    pub fn get(&mut self, text: &str, make: impl FnOnce(&str) -> T) -> T {
        if text.len() > MAX_LEN {
            return make(text);
        }
        // FNV-1a
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
        let slot = &mut self.slots[hash as usize & (SLOTS - 1)];
        match slot {
            Some((kept, value)) if **kept == *text => value.clone(),
            _ => {
                let value = make(text);
                *slot = Some((text.into(), value.clone()));
                value
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_is_made_once_a_long_one_every_time() {
        let mut names = Names::default();
        let made = std::cell::Cell::new(0);
        let mut get = |text: &str| {
            names.get(text, |t| {
                made.set(made.get() + 1);
                t.to_owned()
            })
        };
        assert_eq!(get("user"), "user");
        assert_eq!(get("user"), "user");
        let long = "x".repeat(MAX_LEN + 1);
        assert_eq!(get(&long), long);
        assert_eq!(get(&long), long);
        assert_eq!(made.get(), 3);
    }

    #[test]
    fn a_slot_keeps_the_last_text_that_hashes_to_it() {
        let mut names = Names::default();
        // Distinct texts, some sharing slots: every value is its own text's.
        let texts: Vec<String> = (0..2 * SLOTS).map(|i| format!("n{i}")).collect();
        for _ in 0..2 {
            for t in &texts {
                assert_eq!(&names.get(t, str::to_owned), t);
            }
        }
    }
}
