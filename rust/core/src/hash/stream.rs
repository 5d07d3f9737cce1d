//! [`StreamHasher`]: one SHA-256 over a stream of chunks, on a long-lived
//! worker thread while the producer makes the next chunk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};

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
