//! SHA-256 payload hashing (the `sha2` crate; it detects the CPU's SHA
//! extensions at run time).

use std::sync::{mpsc, Mutex, MutexGuard};

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

enum Msg {
    Chunk(Vec<u8>),
    Finish,
    Reset,
}

/// The long-lived hashing thread: spawned once, then woken per stream, so
/// a stream pays neither a thread start nor a cold CPU.
struct Worker {
    /// The process that started it: a forked child has no such thread.
    pid: u32,
    tx: mpsc::Sender<Msg>,
    /// The hash state after `Msg::Finish` (the worker starts afresh).
    done: mpsc::Receiver<Sha256>,
    recycled: mpsc::Receiver<Vec<u8>>,
}

impl Worker {
    fn spawn() -> Option<Worker> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let (done_tx, done) = mpsc::channel::<Sha256>();
        let (back_tx, recycled) = mpsc::channel::<Vec<u8>>();
        std::thread::Builder::new()
            .name("ctxengine-sha256".into())
            .spawn(move || {
                let mut h = Sha256::new();
                for msg in rx {
                    match msg {
                        Msg::Chunk(mut chunk) => {
                            h.update(&chunk);
                            chunk.clear();
                            let _ = back_tx.send(chunk);
                        }
                        Msg::Finish => {
                            let _ = done_tx.send(std::mem::take(&mut h));
                        }
                        Msg::Reset => h = Sha256::new(),
                    }
                }
            })
            .ok()?;
        Some(Worker {
            pid: std::process::id(),
            tx,
            done,
            recycled,
        })
    }
}

static WORKER: Mutex<Option<Worker>> = Mutex::new(None);

/// One SHA-256 over a byte stream produced in chunks, hashed on a worker
/// thread while the producer makes the next chunk. Chunks are hashed in the
/// order pushed; buffers come back for reuse. When the worker is busy with
/// another stream (or cannot be started), chunks are hashed inline.
pub struct StreamHasher {
    worker: Option<MutexGuard<'static, Option<Worker>>>,
    inline: Sha256,
    /// Chunks went to the worker and the stream is not finished yet.
    open: bool,
    /// The worker vanished mid-stream (it does not: hashing cannot fail).
    lost: bool,
}

impl StreamHasher {
    pub fn new() -> Self {
        let worker = match WORKER.try_lock() {
            Ok(mut guard) => {
                let pid = std::process::id();
                if guard.as_ref().is_none_or(|w| w.pid != pid) {
                    // First use, or a forked child: (re)start the thread.
                    *guard = Worker::spawn();
                }
                guard.is_some().then_some(guard)
            }
            Err(_) => None,
        };
        StreamHasher {
            worker,
            inline: Sha256::new(),
            open: false,
            lost: false,
        }
    }

    fn worker(&self) -> Option<&Worker> {
        self.worker.as_ref().and_then(|g| g.as_ref())
    }

    /// Queue `chunk`; returns an empty buffer (a returned one, or a new one
    /// of `capacity`) to fill next.
    pub fn push(&mut self, chunk: Vec<u8>, capacity: usize) -> Vec<u8> {
        let unsent = match self.worker() {
            Some(w) => match w.tx.send(Msg::Chunk(chunk)) {
                Ok(()) => None,
                Err(mpsc::SendError(Msg::Chunk(chunk))) => Some(chunk),
                Err(_) => None,
            },
            None => Some(chunk),
        };
        match unsent {
            None => {
                self.open = true;
                self.worker()
                    .and_then(|w| w.recycled.try_recv().ok())
                    .unwrap_or_else(|| Vec::with_capacity(capacity))
            }
            Some(mut chunk) => {
                self.worker = None;
                if self.open {
                    self.lost = true;
                } else {
                    self.inline.update(&chunk);
                }
                chunk.clear();
                chunk
            }
        }
    }

    /// The digest of everything pushed followed by `last`, and the largest
    /// buffer handed back (for reuse); `None` only if the worker died
    /// mid-stream.
    pub fn finish(mut self, last: &[u8]) -> Option<([u8; 32], Vec<u8>)> {
        if self.lost {
            return None;
        }
        let (mut h, spare) = if self.open {
            self.open = false;
            let w = self.worker()?;
            w.tx.send(Msg::Finish).ok()?;
            let h = w.done.recv().ok()?;
            let spare = w
                .recycled
                .try_iter()
                .max_by_key(Vec::capacity)
                .unwrap_or_default();
            (h, spare)
        } else {
            (std::mem::take(&mut self.inline), Vec::new())
        };
        h.update(last);
        Some((h.finalize().into(), spare))
    }
}

impl Default for StreamHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for StreamHasher {
    fn drop(&mut self) {
        if self.open {
            // Abandoned mid-stream (an error in the producer): start clean.
            if let Some(w) = self.worker() {
                let _ = w.tx.send(Msg::Reset);
            }
        }
    }
}

/// Lowercase SHA-256 hex of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&sha256(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_hash_like_one_by_one() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut spans = Vec::new();
        let mut a = 0;
        for n in [0usize, 1, 63, 64, 65, 1000, 30_000, 5, 68_802] {
            spans.push((a, a + n));
            a += n;
        }
        let want: Vec<[u8; 32]> = spans.iter().map(|&(a, b)| sha256(&data[a..b])).collect();
        for threads in [1, 2, 3, 8, 100] {
            assert_eq!(sha256_spans(&data, &spans, threads), want);
        }
        assert!(sha256_spans(&data, &[], 2).is_empty());
    }

    #[test]
    fn stream_hash_equals_one_shot() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 256) as u8).collect();
        for chunk in [1usize, 63, 64, 4096, 70_000, 300_000] {
            let mut h = StreamHasher::new();
            let mut parts = data.chunks(chunk).collect::<Vec<_>>();
            let last = parts.pop().unwrap_or(&[]);
            for p in parts {
                let mut buf = h.push(p.to_vec(), 16);
                assert!(buf.is_empty());
                buf.push(1); // a reused buffer is the caller's to fill
            }
            assert_eq!(h.finish(last).map(|r| r.0), Some(sha256(&data)));
        }
        let abc = StreamHasher::new().finish(b"abc").map(|r| r.0);
        assert_eq!(abc, Some(sha256(b"abc")));
        // dropped unfinished: the worker starts clean for the next stream
        let mut abandoned = StreamHasher::new();
        drop(abandoned.push(vec![1, 2, 3], 16));
        drop(abandoned);
        let mut next = StreamHasher::new();
        drop(next.push(b"ab".to_vec(), 16));
        assert_eq!(next.finish(b"c").map(|r| r.0), Some(sha256(b"abc")));
        // two streams at once: the second hashes inline
        let (mut one, mut two) = (StreamHasher::new(), StreamHasher::new());
        drop(one.push(b"xy".to_vec(), 16));
        drop(two.push(b"ab".to_vec(), 16));
        assert_eq!(two.finish(b"c").map(|r| r.0), Some(sha256(b"abc")));
        assert_eq!(one.finish(b"z").map(|r| r.0), Some(sha256(b"xyz")));
    }

    #[test]
    fn known_digests() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
