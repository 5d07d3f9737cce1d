//! SHA-256 payload hashing (the `sha2` crate; it detects the CPU's SHA
//! extensions at run time).

mod prefix;
mod stream;
#[cfg(test)]
mod tests;

pub use prefix::PrefixStates;
pub use stream::StreamHasher;

use sha2::{Digest, Sha256};

/// The SHA-256 digest of `bytes`.
#[inline]
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lowercase hex of a digest.
pub fn hex(digest: &[u8; 32]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for &b in digest {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// Threads worth spreading `bytes` of spans over: one below 256 KiB, else
/// the machine's cores, at most four.
pub fn span_threads(bytes: usize) -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if bytes < 256 * 1024 {
        return 1;
    }
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}

/// The SHA-256 digest of each `data[start..end]` span, spread over up to
/// `threads` threads (the calling one included). Pure work: callers may run
/// it with the Python GIL released.
pub fn sha256_spans(data: &[u8], spans: &[(usize, usize)], threads: usize) -> Vec<[u8; 32]> {
    let mut out = vec![[0u8; 32]; spans.len()];
    let threads = threads.max(1).min(spans.len().max(1));
    if threads == 1 {
        for (d, &(a, b)) in out.iter_mut().zip(spans) {
            *d = sha256(&data[a..b]);
        }
        return out;
    }
    // Split by bytes, not by count, so the threads finish together.
    let total: usize = spans.iter().map(|&(a, b)| b - a).sum();
    let share = total.div_ceil(threads);
    let mut cuts = vec![0usize];
    let mut acc = 0usize;
    for (i, &(a, b)) in spans.iter().enumerate() {
        acc += b - a;
        if acc >= share * cuts.len() && cuts.len() < threads {
            cuts.push(i + 1);
        }
    }
    cuts.push(spans.len());
    cuts.dedup();
    // (digests to fill, spans to hash) per thread
    let mut jobs = Vec::with_capacity(cuts.len());
    let mut rest: &mut [[u8; 32]] = &mut out;
    for w in cuts.windows(2) {
        let (chunk, tail) = rest.split_at_mut(w[1] - w[0]);
        rest = tail;
        jobs.push((chunk, &spans[w[0]..w[1]]));
    }
    let hash_all = |(digests, work): (&mut [[u8; 32]], &[(usize, usize)])| {
        for (d, &(a, b)) in digests.iter_mut().zip(work) {
            *d = sha256(&data[a..b]);
        }
    };
    std::thread::scope(|scope| {
        let mut jobs = jobs.into_iter();
        let mine = jobs.next();
        for job in jobs {
            scope.spawn(move || hash_all(job));
        }
        if let Some(job) = mine {
            hash_all(job);
        }
        // scope() joins the rest (sha256 does not panic).
    });
    out
}
