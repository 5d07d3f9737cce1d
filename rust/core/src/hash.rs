//! SHA-256 payload hashing (the `sha2` crate; it detects the CPU's SHA
//! extensions at run time).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

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
    /// A stream is starting: be ready (the first message wakes the thread).
    Wake,
    /// Continue from this state (what the producer hashed inline so far).
    Start(Sha256),
    Chunk(Vec<u8>),
    Finish,
}

/// The long-lived hashing thread: spawned once, then woken per stream, so
/// a stream pays no thread start.
struct Worker {
    /// The process that started it: a forked child has no such thread.
    pid: u32,
    tx: mpsc::Sender<Msg>,
    /// Set by the thread when it has taken the stream's `Wake`.
    ready: Arc<AtomicBool>,
    /// The hash state after `Msg::Finish`.
    done: mpsc::Receiver<Sha256>,
    recycled: mpsc::Receiver<Vec<u8>>,
}

impl Worker {
    fn spawn() -> Option<Worker> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let (done_tx, done) = mpsc::channel::<Sha256>();
        let (back_tx, recycled) = mpsc::channel::<Vec<u8>>();
        let ready = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ready);
        std::thread::Builder::new()
            .name("ctxengine-sha256".into())
            .spawn(move || {
                let mut h = Sha256::new();
                for msg in rx {
                    match msg {
                        Msg::Wake => flag.store(true, Ordering::Release),
                        Msg::Start(state) => h = state,
                        Msg::Chunk(mut chunk) => {
                            h.update(&chunk);
                            chunk.clear();
                            let _ = back_tx.send(chunk);
                        }
                        Msg::Finish => {
                            let _ = done_tx.send(std::mem::take(&mut h));
                        }
                    }
                }
            })
            .ok()?;
        Some(Worker {
            pid: std::process::id(),
            tx,
            ready,
            done,
            recycled,
        })
    }
}

static WORKER: Mutex<Option<Worker>> = Mutex::new(None);

/// The worker's answer. It is due within a chunk's hashing time, so the
/// caller polls a little before sleeping: waking a sleeping thread can cost
/// more than that (in a virtual machine especially). Polling yields the
/// CPU, in case the worker waits for this very one.
fn wait<T>(rx: &mpsc::Receiver<T>) -> Option<T> {
    let start = std::time::Instant::now();
    loop {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        if start.elapsed() > std::time::Duration::from_millis(1) {
            return rx.recv().ok();
        }
        std::thread::yield_now();
    }
}

/// One SHA-256 over a byte stream produced in chunks. The producer hashes
/// chunks itself until the worker thread, woken when the stream starts, is
/// up; from then on the worker hashes them (continuing from the producer's
/// state) while the producer makes the next one. So a stream is never
/// slower than hashing inline by more than a message, and a long one costs
/// little more than its hashing. Buffers come back for reuse. When the
/// worker is busy with another stream (or cannot be started), everything
/// is hashed inline.
pub struct StreamHasher {
    worker: Option<MutexGuard<'static, Option<Worker>>>,
    inline: Sha256,
    /// The worker holds the state: chunks go to it.
    handed: bool,
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
                match guard.as_ref() {
                    Some(w) => {
                        w.ready.store(false, Ordering::Relaxed);
                        // Wake it now: it gets going while we produce.
                        w.tx.send(Msg::Wake).is_ok().then_some(guard)
                    }
                    None => None,
                }
            }
            Err(_) => None,
        };
        StreamHasher {
            worker,
            inline: Sha256::new(),
            handed: false,
            lost: false,
        }
    }

    fn worker(&self) -> Option<&Worker> {
        self.worker.as_ref().and_then(|g| g.as_ref())
    }

    /// Hash `chunk` (here, or on the worker once it is up); returns an
    /// empty buffer (this one, a returned one, or a new one of `capacity`)
    /// to fill next.
    pub fn push(&mut self, mut chunk: Vec<u8>, capacity: usize) -> Vec<u8> {
        if !self.handed {
            let up = self
                .worker()
                .is_some_and(|w| w.ready.load(Ordering::Acquire));
            if !up {
                self.inline.update(&chunk);
                chunk.clear();
                return chunk;
            }
            let state = std::mem::take(&mut self.inline);
            match self.worker().map(|w| w.tx.send(Msg::Start(state))) {
                Some(Ok(())) => self.handed = true,
                Some(Err(mpsc::SendError(Msg::Start(state)))) => {
                    self.inline = state;
                    self.worker = None;
                    self.inline.update(&chunk);
                    chunk.clear();
                    return chunk;
                }
                _ => {
                    self.lost = true;
                    chunk.clear();
                    return chunk;
                }
            }
        }
        match self.worker().map(|w| w.tx.send(Msg::Chunk(chunk))) {
            Some(Ok(())) => self
                .worker()
                .and_then(|w| w.recycled.try_recv().ok())
                .unwrap_or_else(|| Vec::with_capacity(capacity)),
            Some(Err(mpsc::SendError(Msg::Chunk(mut chunk)))) => {
                self.lost = true;
                chunk.clear();
                chunk
            }
            _ => {
                self.lost = true;
                Vec::with_capacity(capacity)
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
        let (mut h, spare) = if self.handed {
            self.handed = false;
            let w = self.worker()?;
            w.tx.send(Msg::Finish).ok()?;
            let h = wait(&w.done)?;
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
        if self.handed {
            // Abandoned mid-stream (an error in the producer): collect the
            // state, so the worker is idle for the next stream.
            if let Some(w) = self.worker() {
                if w.tx.send(Msg::Finish).is_ok() {
                    let _ = wait(&w.done);
                }
            }
        }
    }
}

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
    fn prefix_states_hash_exactly() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 253) as u8).collect();
        let mut p = PrefixStates::new(1 << 20);
        for (n, stable) in [
            (5_000usize, 4_000usize),
            (5_000, 4_000), // repeat: from the stored state
            (9_000, 8_500), // grown
            (9_000, 8_500),
            (7_000, 6_999),   // shorter than stored: an earlier entry fits
            (3_000, 500),     // too short to store
            (20_000, 20_000), // all stable
            (100, 64),
        ] {
            assert_eq!(p.sha256(&data[..n], stable), sha256(&data[..n]));
        }
        // same first bytes, different prefixes
        let mut other = data.clone();
        other[2_000] ^= 1;
        assert_eq!(p.sha256(&other[..9_000], 8_500), sha256(&other[..9_000]));
        assert_eq!(p.sha256(&data[..9_000], 8_500), sha256(&data[..9_000]));
        // the bound holds
        let mut small = PrefixStates::new(10_000);
        for k in 0..50u8 {
            let mut d = data[..6_000].to_vec();
            d[0] = k;
            assert_eq!(small.sha256(&d, 6_000), sha256(&d));
            assert!(small.held_bytes() <= 10_000);
        }
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
